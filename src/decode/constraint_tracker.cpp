#include "decode/constraint_tracker.h"

#include "core/error.h"

namespace lockstep {

ConstraintTracker::ConstraintTracker(std::shared_ptr<const constraints::Constraint> constraint,
                                     std::shared_ptr<const constraints::ReasoningBudget> budget)
    : constraint_(std::move(constraint)) {
  LOCKSTEP_CHECK(constraint_ || budget, "ConstraintTracker: neither a grammar nor a budget");
  if (constraint_) grammar_.emplace(constraint_->start());
  if (budget) budget_.emplace(budget->start());
}

void ConstraintTracker::take_row(size_t row) {
  forced_[row] = budget_ ? budget_->forced() : -1;
  if (!grammar_) return;
  grammar_->allowed(masks_[row]);
  // The grammars after a reasoning block allow its close wherever the budget forces it; any
  // other grammar keeps its own rule, so the output always satisfies it.
  if (forced_[row] >= 0 && !masks_[row].test(forced_[row])) forced_[row] = -1;
}

size_t ConstraintTracker::plan(std::span<const int32_t> drafts) {
  // A planned round whose forward never came back (an error) leaves no drafts behind.
  if (grammar_) grammar_->rollback(planned_);
  if (budget_) budget_->rollback(planned_);
  planned_ = 0;
  drafts_.clear();
  if (forced_.size() < drafts.size() + 1) {
    forced_.resize(drafts.size() + 1);
    if (grammar_) masks_.resize(drafts.size() + 1);
  }
  // Without a budget nothing is forced and no row's mask is needed to cut the block.
  const bool now = budget_.has_value();
  masks_taken_ = false;
  auto row = [&](size_t r) {
    if (now)
      take_row(r);
    else
      forced_[r] = -1;
  };
  row(0);
  for (const int32_t d : drafts) {
    if (forced_[planned_] >= 0 && d != forced_[planned_]) break;
    // accept() refuses what allowed() would not contain (anything after an accepted EOS, too).
    if (grammar_ && !grammar_->accept(d)) break;
    if (budget_) budget_->accept(d);
    ++planned_;
    drafts_.push_back(d);
    row(planned_);
  }
  masks_taken_ = now;
  return planned_;
}

void ConstraintTracker::take_masks() {
  if (masks_taken_) return;
  // Only plans without a budget get here, so grammar_ is set; it stands after the planned drafts.
  grammar_->rollback(planned_);
  grammar_->allowed(masks_[0]);
  for (size_t j = 0; j < planned_; ++j) {
    LOCKSTEP_CHECK(grammar_->accept(drafts_[j]), "constraint refused a draft it accepted in plan()");
    grammar_->allowed(masks_[j + 1]);
  }
  masks_taken_ = true;
}

const constraints::TokenMask* ConstraintTracker::mask(size_t row) const {
  if (!grammar_) return nullptr;
  LOCKSTEP_CHECK(masks_taken_, "ConstraintTracker::mask before take_masks()");
  return &masks_[row];
}

void ConstraintTracker::settle(std::span<const int32_t> emitted) {
  LOCKSTEP_CHECK(!emitted.empty() && emitted.size() - 1 <= planned_,
                 "ConstraintTracker::settle: ", emitted.size(), " tokens for ", planned_,
                 " planned drafts");
  const size_t drop = planned_ - (emitted.size() - 1);
  planned_ = 0;
  if (budget_) {
    budget_->rollback(drop);
    budget_->accept(emitted.back());
  }
  if (!grammar_) return;
  grammar_->rollback(drop);
  // Chosen under mask(emitted.size() - 1), so the state accepts it.
  LOCKSTEP_CHECK(grammar_->accept(emitted.back()), "constraint refused a token its mask allowed (",
                 emitted.back(), ")");
}

bool ConstraintTracker::complete() const {
  // With EOS ids the decoder stops at the EOS token itself (is_eos).
  return grammar_ && constraint_->vocab().eos_ids().empty() && grammar_->finished();
}

ConstraintCheck check_constraint(const constraints::Constraint& constraint,
                                 std::span<const int32_t> tokens) {
  constraints::ConstraintState st = constraint.start();
  for (const int32_t t : tokens)
    if (!st.accept(t)) return ConstraintCheck::kInvalid;
  const bool ended_by_eos = !tokens.empty() && constraint.vocab().is_eos(tokens.back());
  return ended_by_eos || st.can_end() ? ConstraintCheck::kComplete : ConstraintCheck::kIncomplete;
}

const char* to_string(ConstraintCheck c) {
  switch (c) {
    case ConstraintCheck::kComplete: return "complete";
    case ConstraintCheck::kIncomplete: return "incomplete";
    case ConstraintCheck::kInvalid: return "invalid";
  }
  return "?";
}

}  // namespace lockstep
