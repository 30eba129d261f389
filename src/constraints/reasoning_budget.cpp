#include "constraints/reasoning_budget.h"

#include <algorithm>
#include <string_view>

#include "core/error.h"

namespace lockstep::constraints {

namespace {

// The whitespace the reasoning split and the reasoning grammar skip before "<think>".
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Bytes of `tag` matched after `matched` matched bytes and then byte `b`: the longest suffix of
// tag[0, matched) + b that is a prefix of tag (tags are a few bytes, so the direct search is fine).
size_t advance_match(std::string_view tag, size_t matched, char b) {
  if (tag[matched] == b) return matched + 1;
  std::string seen(tag.substr(0, matched));
  seen.push_back(b);
  for (size_t k = std::min(seen.size(), tag.size() - 1); k > 0; --k)
    if (std::string_view(seen).substr(seen.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

}  // namespace

ReasoningBudget::ReasoningBudget(ReasoningBudgetSpec spec, std::shared_ptr<const TokenVocabulary> vocab)
    : spec_(std::move(spec)), vocab_(std::move(vocab)) {}

std::shared_ptr<const ReasoningBudget> ReasoningBudget::make(ReasoningBudgetSpec spec,
                                                             std::shared_ptr<const TokenVocabulary> vocab) {
  LOCKSTEP_CHECK(vocab != nullptr);
  if (spec.budget < 0) fail("reasoning budget: must be >= 0 tokens, got ", spec.budget);
  if (spec.close.empty()) fail("reasoning budget: the forced close has no tokens");
  if (spec.open_tag.empty() || spec.close_tag.empty()) fail("reasoning budget: empty reasoning tag");
  for (int32_t id : spec.close)
    if (id < 0 || id >= vocab->size()) fail("reasoning budget: close token ", id, " is outside the vocabulary");
  return std::make_shared<ReasoningBudget>(std::move(spec), std::move(vocab));
}

ReasoningBudgetState ReasoningBudget::start() const { return ReasoningBudgetState(shared_from_this()); }

ReasoningBudgetState::ReasoningBudgetState(std::shared_ptr<const ReasoningBudget> budget)
    : budget_(std::move(budget)) {
  Step s;
  s.phase = budget_->spec().start == ReasoningStart::kOpened ? Phase::kInBlock : Phase::kBeforeBlock;
  history_.push_back(settle(s));
}

ReasoningBudgetState::Step ReasoningBudgetState::settle(Step s) const {
  if (s.phase == Phase::kInBlock && s.spent >= budget_->spec().budget) {
    s.phase = Phase::kForcing;
    s.matched = 0;
  }
  return s;
}

ReasoningBudgetState::Step ReasoningBudgetState::next(Step s, int32_t token) const {
  const ReasoningBudgetSpec& spec = budget_->spec();
  if (s.phase == Phase::kDone) return s;
  if (s.phase == Phase::kForcing) {
    if (token == spec.close[s.matched] && ++s.matched < spec.close.size()) return s;
    s.phase = Phase::kDone;  // the close is written (or something else was chosen instead)
    return s;
  }
  // The block's tokens are counted from the one after the token that opened it.
  const bool counted = s.phase == Phase::kInBlock;
  const TokenVocabulary& vocab = budget_->vocab();
  const std::string_view bytes =
      token >= 0 && token < vocab.size() ? std::string_view(vocab.bytes(token)) : std::string_view();
  for (const char b : bytes) {
    if (s.phase == Phase::kBeforeBlock) {
      if (s.matched == 0 && is_space(b)) continue;
      if (b != spec.open_tag[s.matched]) {
        s.phase = Phase::kDone;  // the answer does not open with a block
        return s;
      }
      if (++s.matched == spec.open_tag.size()) {
        s.phase = Phase::kInBlock;
        s.matched = 0;
      }
    } else {
      s.matched = advance_match(spec.close_tag, s.matched, b);
      if (s.matched == spec.close_tag.size()) {
        s.phase = Phase::kDone;  // closed by the model within its budget
        return s;
      }
    }
  }
  if (counted) ++s.spent;
  return settle(s);
}

int32_t ReasoningBudgetState::forced() const {
  const Step& s = history_.back();
  return s.phase == Phase::kForcing ? budget_->spec().close[s.matched] : -1;
}

void ReasoningBudgetState::accept(int32_t token) { history_.push_back(next(history_.back(), token)); }

void ReasoningBudgetState::rollback(size_t n) {
  if (n > size()) fail("reasoning budget: rollback of ", n, " tokens past the ", size(), " accepted");
  history_.resize(history_.size() - n);
}

}  // namespace lockstep::constraints
