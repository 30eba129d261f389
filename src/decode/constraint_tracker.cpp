#include "decode/constraint_tracker.h"

#include "core/error.h"

namespace lockstep {

ConstraintTracker::ConstraintTracker(std::shared_ptr<const constraints::Constraint> constraint)
    : constraint_(std::move(constraint)), state_(constraint_->start()) {}

size_t ConstraintTracker::plan(std::span<const int32_t> drafts) {
  // A planned round whose forward never came back (an error) leaves no drafts behind.
  state_.rollback(planned_);
  planned_ = 0;
  if (masks_.size() < drafts.size() + 1) masks_.resize(drafts.size() + 1);
  state_.allowed(masks_[0]);
  for (const int32_t d : drafts) {
    // accept() refuses what allowed() would not contain (anything after an accepted EOS, too).
    if (!state_.accept(d)) break;
    ++planned_;
    state_.allowed(masks_[planned_]);
  }
  return planned_;
}

void ConstraintTracker::settle(std::span<const int32_t> emitted) {
  LOCKSTEP_CHECK(!emitted.empty() && emitted.size() - 1 <= planned_,
                 "ConstraintTracker::settle: ", emitted.size(), " tokens for ", planned_,
                 " planned drafts");
  state_.rollback(planned_ - (emitted.size() - 1));
  planned_ = 0;
  // Chosen under mask(emitted.size() - 1), so the state accepts it.
  LOCKSTEP_CHECK(state_.accept(emitted.back()), "constraint refused a token its mask allowed (",
                 emitted.back(), ")");
}

bool ConstraintTracker::complete() const {
  // With EOS ids the decoder stops at the EOS token itself (is_eos).
  return constraint_->vocab().eos_ids().empty() && state_.finished();
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
