// Drafting with the target's own MTP head. Slot p of the head reads the target's final hidden at
// p and the token at p + 1 and predicts p + 2; chained drafts feed its own output hidden back.
// Its KV holds only slots computed from true target hiddens (teacher-forced catch-up after each
// round); chained slots are dropped before the next round.
#pragma once

#include <memory>

#include "decode/speculative/drafter.h"
#include "decode/token_rules.h"
#include "models/model.h"
#include "sampling/sampler.h"

namespace lockstep {

class MtpSpecDrafter final : public Drafter {
 public:
  MtpSpecDrafter(Model& target, const SamplingParams& sampling);
  std::string name() const override { return "mtp"; }
  bool needs_hidden() const override { return true; }
  void observe_hidden(int64_t first_position, std::span<const float> rows) override;
  std::vector<int32_t> propose(std::span<const int32_t> history, int64_t prompt_len,
                               int k) override;
  void forget() override;

 private:
  MtpDrafter& mtp_;
  int64_t H_, V_;
  Sampler sampler_;
  TokenRules rules_;
  std::unique_ptr<SequenceState> seq_;
  int64_t valid_slots_ = 0;           // slots 0..valid_slots_-1 used true hiddens
  std::vector<float> target_hidden_;  // [position][H]
};

}  // namespace lockstep
