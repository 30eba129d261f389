// A reasoning budget: at most N tokens inside a thinking model's reasoning block, then the block
// is closed by force. While the budget lasts every token is allowed; once N tokens have been
// written inside the block (and it has not closed by itself), the next tokens are, one position
// at a time, exactly the tokens of the forced close (the tokenization of "\n</think>\n\n"), and
// then everything is allowed again. A budget of 0 closes the block as soon as it opens.
//
// Like a grammar's mask (constraint.h), what the budget allows at a position is a pure function
// of the exact token prefix: the state after each token is computed from the tokens' bytes alone
// and kept as a stack, so rollback is popping, and a drafted token that differs from a forced one
// is rejected like any mismatch. The decoder combines it with a grammar (decode/
// constraint_tracker.h): the forced token must also be one the grammar allows, which holds for
// the grammars that apply after the block (reasoning_prefix.h), as both read the block the same
// way (whitespace, "<think>", text up to the first "</think>").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "constraints/reasoning_prefix.h"
#include "constraints/token_vocab.h"

namespace lockstep::constraints {

struct ReasoningBudgetSpec {
  int64_t budget = 0;  // tokens the block may hold, >= 0 (the forced close not counted)
  // kOpened: the prompt ends inside the block, so counting starts with the first output token.
  // kOptional: the output may open a block with "<think>" after whitespace; otherwise the
  // budget never applies.
  ReasoningStart start = ReasoningStart::kOpened;
  std::vector<int32_t> close;  // the forced tokens (non-empty)
  std::string open_tag = "<think>", close_tag = "</think>";
};

class ReasoningBudgetState;

// Immutable and shared by every request that uses it; each sequence keeps its own state.
class ReasoningBudget : public std::enable_shared_from_this<ReasoningBudget> {
 public:
  // Throws lockstep::Error for a negative budget, an empty close or tag, or a close id outside
  // the vocabulary.
  static std::shared_ptr<const ReasoningBudget> make(ReasoningBudgetSpec spec,
                                                     std::shared_ptr<const TokenVocabulary> vocab);
  ReasoningBudgetState start() const;
  const ReasoningBudgetSpec& spec() const { return spec_; }
  const TokenVocabulary& vocab() const { return *vocab_; }

  ReasoningBudget(ReasoningBudgetSpec spec, std::shared_ptr<const TokenVocabulary> vocab);

 private:
  ReasoningBudgetSpec spec_;
  std::shared_ptr<const TokenVocabulary> vocab_;
};

class ReasoningBudgetState {
 public:
  enum class Phase {
    kBeforeBlock,  // kOptional: whitespace so far, or a prefix of the open tag
    kInBlock,      // counting the block's tokens
    kForcing,      // the budget is spent: writing the forced close
    kDone,         // no block, the block closed, or the close was forced: anything goes
  };

  // The one token allowed next (the next token of the forced close), or -1: any token.
  int32_t forced() const;
  // Advances by any token. During kForcing a token other than forced() (a grammar that would
  // not allow the close) ends the budget's work: the state goes to kDone.
  void accept(int32_t token);
  // Undoes the last n accepted tokens (n <= size()).
  void rollback(size_t n);
  size_t size() const { return history_.size() - 1; }
  Phase phase() const { return history_.back().phase; }
  // Tokens counted inside the block so far.
  int64_t spent() const { return history_.back().spent; }

 private:
  friend class ReasoningBudget;
  struct Step {
    Phase phase = Phase::kDone;
    int64_t spent = 0;
    // kBeforeBlock: bytes of the open tag matched; kInBlock: bytes of the close tag matched;
    // kForcing: forced tokens written.
    size_t matched = 0;
  };
  explicit ReasoningBudgetState(std::shared_ptr<const ReasoningBudget> budget);
  // The step after `s` on `token`.
  Step next(Step s, int32_t token) const;
  // kInBlock with the budget spent becomes kForcing.
  Step settle(Step s) const;

  std::shared_ptr<const ReasoningBudget> budget_;
  std::vector<Step> history_;  // [0]: start; one entry per accepted token
};

}  // namespace lockstep::constraints
