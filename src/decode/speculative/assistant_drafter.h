// Drafting with a Gemma 4 assistant (models/gemma4_assistant.h): each round's first step reads
// the target's final-normed hidden at the position before the last chosen token and that token's
// embedding; later steps feed back the assistant's own output hidden and its last draft. Every
// step attends to the target's cache as it stands (exactly the accepted history minus its last
// token, which the decoder guarantees after each verify), and only reads it, so what a rejected
// draft leaves behind is nothing: the next round starts from the target's state alone.
#pragma once

#include "decode/speculative/drafter.h"
#include "models/gemma4_assistant.h"
#include "models/model.h"
#include "sampling/sampler.h"

namespace lockstep {

class AssistantDrafter final : public Drafter {
 public:
  AssistantDrafter(Gemma4Assistant& assistant, const Model& target,
                   const SamplingParams& sampling);
  std::string name() const override { return "assistant"; }
  bool needs_hidden() const override { return true; }
  void observe_hidden(int64_t first_position, std::span<const float> rows) override;
  void bind_target(const SequenceState* target) override { target_ = target; }
  std::vector<int32_t> propose(std::span<const int32_t> history, int64_t prompt_len,
                               int k) override;

 private:
  Gemma4Assistant& assistant_;
  int64_t H_, V_;
  Sampler sampler_;
  const SequenceState* target_ = nullptr;
  std::vector<float> target_hidden_;  // [position][H]
};

}  // namespace lockstep
