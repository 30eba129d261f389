// Allowed-token masks and the context-independent token cache behind them.
//
// For a matcher stack whose top few entries are known (its "context": the top kContextDepth
// grammar positions), most tokens are decided by those entries alone: either their bytes are
// consumed without returning below the context (accepted), or they fail inside it (rejected).
// Only tokens that run past the context's last return ("uncertain") need the real stack below.
// ContextMaskCache computes that split once per context by walking the vocabulary trie with a
// matcher whose bottom is left unknown (Matcher::kUnknown), and shares it among every sequence
// and request of a compiled constraint. A sequence's mask is then the union, over its ready
// stacks, of the context's accepted set plus the uncertain tokens that its full stack accepts.
// That is the same set a token-by-token check would give (a test proves it), so the mask is a
// function of the matcher state alone, and the state a function of the exact token prefix.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "constraints/grammar.h"
#include "constraints/matcher.h"
#include "constraints/token_vocab.h"

namespace lockstep::constraints {

// A set of token ids as a bitmap over [0, size()).
class TokenMask {
 public:
  TokenMask() = default;
  explicit TokenMask(int32_t size) { resize(size); }
  void resize(int32_t size);
  void clear();
  int32_t size() const { return size_; }
  bool test(int32_t id) const {
    return id >= 0 && id < size_ && (words_[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
  }
  void set(int32_t id) { words_[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }
  void merge(const TokenMask& other);  // this |= other (same size)
  int64_t count() const;
  std::span<const uint64_t> words() const { return words_; }
  bool operator==(const TokenMask& other) const = default;

 private:
  int32_t size_ = 0;
  std::vector<uint64_t> words_;
};

// What a context decides about the vocabulary (see the file comment).
struct ContextTokens {
  TokenMask accepted_bits;            // used when many tokens are accepted
  std::vector<int32_t> accepted_ids;  // used otherwise
  bool dense = false;
  std::vector<int32_t> uncertain;
};

class ContextMaskCache {
 public:
  // Stack entries that make a context. Deeper: fewer uncertain tokens but more contexts (each one
  // a walk over the trie). 3 covers a JSON string's content and its closing quote, and was the
  // fastest overall on Qwen3's vocabulary (docs/constraints.md). Any depth >= 1 gives
  // the same masks (a test checks 1 and the default).
  static constexpr int kDefaultDepth = 3;

  ContextMaskCache(const Grammar& grammar, const TokenVocabulary& vocab, int depth = kDefaultDepth);

  // The split for the context of stack `s` of `matcher` (a sequence's matcher over the same
  // grammar). Thread-safe; computed on first use.
  std::shared_ptr<const ContextTokens> get(const Matcher& matcher, Matcher::StackId s);
  // Contexts computed so far (for benchmarks and tests).
  size_t size() const;

 private:
  std::shared_ptr<const ContextTokens> compute(const std::vector<uint32_t>& positions, bool bottom);

  const Grammar& grammar_;
  const TokenVocabulary& vocab_;
  const size_t depth_;
  mutable std::mutex mutex_;
  Matcher walker_;  // under mutex_: the unknown-bottom matcher the trie walks use
  std::unordered_map<std::string, std::shared_ptr<const ContextTokens>> cache_;
};

}  // namespace lockstep::constraints
