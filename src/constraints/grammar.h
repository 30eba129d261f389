// The compiled grammar the matcher runs: rules of alternatives, each alternative a run of
// elements in one flat array, ended by kEnd. An element is a byte set (a terminal) or a rule
// reference. Built from expressions (expr.h) by GrammarBuilder, which also
//   - prunes every alternative that can derive no finite string (so each live matcher state can
//     still complete: the allowed-token mask is never empty unless the grammar has ended), and
//   - refuses left recursion, which a pushdown matcher cannot run (the error names the rule).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "constraints/expr.h"

namespace lockstep::constraints {

struct Element {
  enum class Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind = Kind::kEnd;
  uint32_t value = 0;  // kBytes: index into Grammar::byte_sets; kRule: rule index
};

struct Grammar {
  std::vector<Element> elements;
  std::vector<ByteSet> byte_sets;               // deduplicated
  std::vector<std::vector<uint32_t>> rule_alts;  // per rule: the element index of each alternative
  std::vector<std::string> rule_names;
  uint32_t root = 0;

  const ByteSet& bytes_at(uint32_t pos) const { return byte_sets[elements[pos].value]; }
  // Text of the grammar in GBNF-like form, for error messages and debugging.
  std::string dump() const;
};

// Thrown (as lockstep::Error's message prefix "constraint matches nothing") when the root rule
// derives no string at all, e.g. the JSON schema `false`.
inline constexpr const char* kEmptyLanguage = "constraint matches nothing";

class GrammarBuilder {
 public:
  // Limit on the lowered size: {m,n} repetitions copy their item, so a schema with
  // "maxLength": 10^9 must fail cleanly instead of exhausting memory.
  static constexpr size_t kMaxElements = 4u << 20;

  // Declares a rule; its body is given later by define() (so rules can refer to each other).
  uint32_t add_rule(std::string name);
  void define(uint32_t rule, ExprPtr body);
  bool defined(uint32_t rule) const { return bodies_[rule] != nullptr; }
  const std::string& name(uint32_t rule) const { return names_[rule]; }
  size_t rule_count() const { return names_.size(); }

  // Lowers every rule; throws lockstep::Error on an undefined rule, left recursion, an empty
  // language or a grammar past kMaxElements.
  Grammar build(uint32_t root);

 private:
  std::vector<std::string> names_;
  std::vector<ExprPtr> bodies_;
};

}  // namespace lockstep::constraints
