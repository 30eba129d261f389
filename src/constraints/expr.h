// The expression language every front end (GBNF, regular expressions, JSON Schema) builds, and
// GrammarBuilder lowers into the flat Grammar the matcher runs (grammar.h).
//
// Expressions are over BYTES: a terminal is one byte from a set. Code-point classes are turned into
// UTF-8 byte sequences here (codepoints()), so the matcher never decodes UTF-8 and a token whose
// bytes end inside a multi-byte character (byte-level BPE vocabularies have many) is handled like
// any other prefix.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep::constraints {

using ByteSet = std::bitset<256>;

// Sorted, non-overlapping, non-adjacent inclusive code-point ranges.
class CodepointSet {
 public:
  CodepointSet() = default;
  static CodepointSet range(char32_t lo, char32_t hi);
  static CodepointSet single(char32_t c) { return range(c, c); }
  static CodepointSet all_scalar_values();  // U+0000..U+10FFFF without the surrogates

  void add(char32_t lo, char32_t hi);
  void add(const CodepointSet& other);
  CodepointSet complement() const;  // within the scalar values
  CodepointSet minus(const CodepointSet& other) const;
  CodepointSet intersect(const CodepointSet& other) const;
  bool contains(char32_t c) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<std::pair<char32_t, char32_t>>& ranges() const { return ranges_; }

 private:
  std::vector<std::pair<char32_t, char32_t>> ranges_;
};

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind : uint8_t {
    kEmpty,   // matches the empty string
    kNever,   // matches nothing (an unsatisfiable branch; pruned when the grammar is built)
    kByte,    // one byte from `bytes`
    kSeq,     // items in order
    kAlt,     // any one of items
    kRepeat,  // items[0] between min and max times (max == kUnbounded: no limit)
    kRef,     // the rule numbered `rule` (GrammarBuilder::add_rule)
  };
  static constexpr uint32_t kUnbounded = UINT32_MAX;

  Kind kind = Kind::kEmpty;
  ByteSet bytes;
  std::vector<ExprPtr> items;
  uint32_t min = 0, max = 0;
  uint32_t rule = 0;
};

// Constructors. seq/alt flatten nested sequences/alternatives and drop kEmpty from sequences.
ExprPtr empty();
ExprPtr never();
ExprPtr byte_set(const ByteSet& bytes);
ExprPtr literal(std::string_view bytes);  // the exact bytes
ExprPtr seq(std::vector<ExprPtr> items);
ExprPtr alt(std::vector<ExprPtr> items);
ExprPtr repeat(ExprPtr item, uint32_t min, uint32_t max);
ExprPtr optional(ExprPtr item);
ExprPtr ref(uint32_t rule);
// One character from `set`, as its UTF-8 bytes (an alternation of byte-range sequences).
ExprPtr codepoints(const CodepointSet& set);

}  // namespace lockstep::constraints
