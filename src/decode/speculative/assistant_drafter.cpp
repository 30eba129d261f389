#include "decode/speculative/assistant_drafter.h"

#include <algorithm>

#include "core/error.h"
#include "decode/token_rules.h"

namespace lockstep {

AssistantDrafter::AssistantDrafter(Gemma4Assistant& assistant, const Model& target,
                                   const SamplingParams& sampling)
    : assistant_(assistant),
      H_(target.config().hidden_size),
      V_(target.config().vocab_size),
      sampler_(sampling) {}

void AssistantDrafter::observe_hidden(int64_t first_position, std::span<const float> rows) {
  const size_t end = static_cast<size_t>(first_position) * H_ + rows.size();
  if (target_hidden_.size() < end) target_hidden_.resize(end);
  std::copy(rows.begin(), rows.end(), target_hidden_.begin() + first_position * H_);
}

std::vector<int32_t> AssistantDrafter::propose(std::span<const int32_t> history,
                                               int64_t prompt_len, int k) {
  const int64_t L = static_cast<int64_t>(history.size());
  if (k <= 0 || L < 2) return {};
  if (!target_) fail("assistant drafter: no target sequence was bound to it");
  if (target_->length != L - 1)
    fail("assistant drafter: the target holds ", target_->length, " tokens, expected ", L - 1,
         " (the history less its last, not yet run, token)");
  if (static_cast<int64_t>(target_hidden_.size()) < (L - 1) * H_)
    fail("assistant drafter: target hidden for position ", L - 2, " was not observed");
  std::vector<int32_t> context(history.begin(), history.end()), drafts;
  std::vector<float> h(target_hidden_.begin() + (L - 2) * H_,
                       target_hidden_.begin() + (L - 1) * H_);
  int32_t token = history.back();
  for (int i = 0; i < k; ++i) {
    const Gemma4Assistant::Step step{target_, token, h};
    const ForwardResult out = assistant_.draft({&step, 1});
    // The sampler's own rule at this position: under seeded sampling the target keeps a draft
    // only if it would have drawn the same token, so drafting with the same draw helps most.
    token = chosen_token(out, 0, sampler_, {context, prompt_len}, V_);
    drafts.push_back(token);
    context.push_back(token);
    h = out.hidden;
  }
  return drafts;
}

}  // namespace lockstep
