// One sequence's constraint during decoding: its ConstraintState and the allowed-token mask of
// each output row of the pending forward (../../docs/constraints.md, "In the decoder").
//
// A round feeds [last chosen token, d1..dk]. Row i chooses the token after d1..di, so its mask is
// allowed() of the exact prefix with those drafts accepted. plan() accepts the drafts one by one,
// taking each row's mask, and stops at the first draft the constraint forbids: that draft can never
// equal the target's masked choice at the row before it, so it is rejected there like any
// mismatch, and the rows after it would never be read, so the block is cut before it. settle()
// then rolls the state back to the accepted prefix and adds the token the target chose last.
// Nothing here depends on which forward or batch the rows came from, so constrained output is
// the same with and without speculation, alone or batched.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "constraints/constraint.h"

namespace lockstep {

class ConstraintTracker {
 public:
  explicit ConstraintTracker(std::shared_ptr<const constraints::Constraint> constraint);

  // Masks for a round whose last chosen token is already accepted: row 0 now, then one per
  // draft accepted. Returns how many of `drafts` the constraint allows in sequence (a prefix);
  // the state holds them until settle().
  size_t plan(std::span<const int32_t> drafts);
  // The mask of output row `row` of the planned round (row <= the accepted drafts).
  const constraints::TokenMask& mask(size_t row) const { return masks_[row]; }
  // After the round: `emitted` are the tokens chosen this round in order; all but the last
  // equal the first drafts. Leaves the state at the prefix ending with emitted.back().
  void settle(std::span<const int32_t> emitted);

  // True when `token` is one of the vocabulary's EOS ids (generation stops after it).
  bool is_eos(int32_t token) const { return constraint_->vocab().is_eos(token); }
  // True when the grammar has ended and the vocabulary has no EOS id to end the output with:
  // nothing may follow, so the output stops here without one. (With EOS ids the grammar's end
  // allows only EOS, and the decoder stops after emitting it.)
  bool complete() const;

 private:
  std::shared_ptr<const constraints::Constraint> constraint_;
  constraints::ConstraintState state_;
  std::vector<constraints::TokenMask> masks_;  // grown, never shrunk (masks keep their buffers)
  size_t planned_ = 0;                         // drafts accepted by plan(), not yet settled
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
