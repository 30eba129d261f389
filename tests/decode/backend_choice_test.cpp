// The decode path's two ways to a token give the same tokens: rules on the forward items
// (Backend::choose_tokens picks the ids where the logits are) and the host Sampler on downloaded
// logits (what a request asking for logprobs still takes). Greedy, seeded, penalties and filters;
// classic decode and speculation with a draft model and lookup; prefill whole and chunked.
#include <gtest/gtest.h>

#include "../models/model_test_util.h"
#include "decode/generate.h"
#include "decode/speculative/draft_model_drafter.h"
#include "decode/speculative/lookup_drafter.h"

namespace lockstep {
namespace {

std::string tiny_model(uint64_t seed) {
  return test::tiny_checkpoint("tiny-qwen3", DType::F32, seed);
}

TEST(BackendChoice, RulesAndHostSamplerGiveTheSameTokens) {
  auto target = load_model(tiny_model(1));
  auto draft = load_model(tiny_model(2));
  const int64_t V = target->config().vocab_size;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 21; ++i) prompt.push_back(static_cast<int32_t>((i * 7919 + 13) % V));
  for (int i = 0; i < 8; ++i) prompt.push_back(prompt[i]);  // repeats: lookup drafts something

  std::vector<SamplingParams> params(4);
  params[1].temperature = 0.8f;
  params[1].seed = 5;
  params[2] = params[1];
  params[2].repetition_penalty = 1.3f;
  params[2].presence_penalty = 0.4f;
  params[2].frequency_penalty = -0.3f;
  params[3] = params[2];
  params[3].top_k = 20;
  params[3].top_p = 0.9f;
  int compared = 0;
  for (const SamplingParams& sp : params) {
    for (int mode = 0; mode < 4; ++mode) {  // classic, chunked prefill, draft model, lookup
      LookupDrafter lookup;
      DraftModelDrafter dm(*draft, sp);
      GenerateOptions o;
      o.sampling = sp;
      o.max_tokens = 24;
      if (mode == 1) o.prefill_chunk = 5;
      if (mode == 2) o.drafter = &dm;
      if (mode == 3) o.drafter = &lookup;
      if (o.drafter) o.draft_width = 3;
      const GenerateResult rules = generate(*target, prompt, o);
      GenerateOptions h = o;
      h.top_logprobs = 0;  // needs the logits: every token through the host Sampler
      LookupDrafter lookup2;
      DraftModelDrafter dm2(*draft, sp);
      if (mode == 2) h.drafter = &dm2;
      if (mode == 3) h.drafter = &lookup2;
      const GenerateResult host = generate(*target, prompt, h);
      EXPECT_EQ(rules.tokens, host.tokens) << "mode " << mode << " temperature "
                                           << sp.temperature << " top_k " << sp.top_k;
      EXPECT_EQ(rules.tokens.size(), 24u);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 16);
}

}  // namespace
}  // namespace lockstep
