// One sequence's constraint during decoding: its grammar state (ConstraintState) and/or its
// reasoning budget (ReasoningBudgetState), and what each output row of the pending forward may
// choose (../../docs/constraints.md, "In the decoder").
//
// A round feeds [last chosen token, d1..dk]. Row i chooses the token after d1..di, so its mask is
// allowed() of the exact prefix with those drafts accepted, and its forced token (the budget's
// close, when spent) is the budget's forced() there. plan() accepts the drafts one by one, taking
// each row's mask and forced token, and stops at the first draft the grammar forbids or that
// differs from the row's forced token: that draft can never equal the target's choice at the row
// before it, so it is rejected there like any mismatch, and the rows after it would never be read,
// so the block is cut before it. settle() then rolls both states back to the accepted prefix and
// adds the token the target chose last. Nothing here depends on which forward or batch the rows
// came from, so constrained output is the same with and without speculation, alone or batched.
//
// The masks are the costly part (a grammar's allowed() walks its stacks over the vocabulary
// cache); the drafts' acceptance is not. So without a reasoning budget plan() only accepts the
// drafts, and take_masks() takes every row's mask afterwards (replaying the accepted drafts), which
// the decoder does while the device runs the forward (ForwardItem::before_choose). With a budget,
// plan() takes them at once: a forced token is kept only where its row's mask allows it, and that
// decides where the block is cut. Either way each row's mask is allowed() of the same prefix.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "constraints/constraint.h"
#include "constraints/reasoning_budget.h"

namespace lockstep {

class ConstraintTracker {
 public:
  // Either may be null (not both).
  ConstraintTracker(std::shared_ptr<const constraints::Constraint> constraint,
                    std::shared_ptr<const constraints::ReasoningBudget> budget = nullptr);

  // Masks for a round whose last chosen token is already accepted: row 0 now, then one per
  // draft accepted. Returns how many of `drafts` are allowed in sequence (a prefix); the states
  // hold them until settle().
  size_t plan(std::span<const int32_t> drafts);
  // Takes the planned round's masks if plan() left them for later (once; a no-op after that).
  void take_masks();
  bool masks_taken() const { return masks_taken_; }
  // The grammar's mask of output row `row` of the planned round (row <= the accepted drafts),
  // after take_masks(); null without a grammar (any token).
  const constraints::TokenMask* mask(size_t row) const;
  // The token row `row` must choose (the reasoning budget's forced close), or -1. A forced token
  // is always one the row's mask allows: where a grammar would forbid it, the grammar wins (-1).
  int32_t forced(size_t row) const { return forced_[row]; }
  // After the round: `emitted` are the tokens chosen this round in order; all but the last
  // equal the first drafts. Leaves the states at the prefix ending with emitted.back().
  void settle(std::span<const int32_t> emitted);

  // True when `token` is one of the grammar vocabulary's EOS ids (generation stops after it).
  bool is_eos(int32_t token) const { return constraint_ && constraint_->vocab().is_eos(token); }
  // True when the grammar has ended and the vocabulary has no EOS id to end the output with:
  // nothing may follow, so the output stops here without one. (With EOS ids the grammar's end
  // allows only EOS, and the decoder stops after emitting it.)
  bool complete() const;

 private:
  // masks_[row] and forced_[row] for the states' current prefix.
  void take_row(size_t row);

  std::shared_ptr<const constraints::Constraint> constraint_;
  std::optional<constraints::ConstraintState> grammar_;
  std::optional<constraints::ReasoningBudgetState> budget_;
  std::vector<constraints::TokenMask> masks_;  // grown, never shrunk (masks keep their buffers)
  std::vector<int32_t> forced_;
  size_t planned_ = 0;                         // drafts accepted by plan(), not yet settled
  std::vector<int32_t> drafts_;                // those drafts (take_masks replays them)
  bool masks_taken_ = false;                   // masks_ hold the planned round's masks
};

// How a whole generation stands against its constraint, replayed token by token on a fresh
// state: kComplete, a complete sentence (EOS, if any, only as the last token); kIncomplete, every
// token allowed but the text can still not end (generation stopped at max_tokens); kInvalid, some
// token was not allowed after the tokens before it (never, for output decoded under it).
enum class ConstraintCheck { kComplete, kIncomplete, kInvalid };
ConstraintCheck check_constraint(const constraints::Constraint& constraint,
                                 std::span<const int32_t> tokens);
const char* to_string(ConstraintCheck c);

}  // namespace lockstep
