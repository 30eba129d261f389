// A separate small model drafts autoregressively with the target's sampling rule (same seed and
// position keying, so at temperature > 0 it agrees with the target as often as greedy would).
// Its KV cache is rolled back to the longest prefix it shares with the accepted history. The draft
// model's pool holds every draft sequence whole (no prefix sharing), so it can run out where the
// target's shared pool does not: then it drafts fewer tokens, or none, that round.
#pragma once

#include <memory>

#include "decode/speculative/drafter.h"
#include "decode/token_rules.h"
#include "models/model.h"
#include "sampling/sampler.h"

namespace lockstep {

class DraftModelDrafter final : public Drafter {
 public:
  DraftModelDrafter(Model& draft, const SamplingParams& sampling);
  std::string name() const override { return "draft"; }
  std::vector<int32_t> propose(std::span<const int32_t> history, int64_t prompt_len,
                               int k) override;
  void forget() override;

 private:
  Model& model_;
  Sampler sampler_;
  TokenRules rules_;
  std::unique_ptr<SequenceState> seq_;
  std::vector<int32_t> consumed_;  // tokens in seq_'s cache, in order
};

}  // namespace lockstep
