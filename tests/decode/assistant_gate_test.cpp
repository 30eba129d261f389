// The generation gate with a Gemma 4 assistant drafter (a random tiny-gemma4 target and
// tiny-gemma4-assistant): prompts longer than the sliding window give classic decode's exact tokens
// under assistant speculation at widths 1 to 4, at temperature 0 and seeded 0.8, and drafting
// leaves the target's cache as it found it (the decoder's cache always holds the history less its
// last token, which the drafter checks every round).
#include <gtest/gtest.h>

#include <random>

#include "../models/model_test_util.h"
#include "decode/speculative/assistant_drafter.h"
#include "decode/verify_gate.h"

namespace lockstep {
namespace {

TEST(AssistantGate, EveryWidthGivesClassicTokens) {
  auto target = load_model(test::tiny_checkpoint("tiny-gemma4", DType::F32, 3));
  auto assistant = load_gemma4_assistant(
      test::tiny_checkpoint("tiny-gemma4-assistant", DType::F32, 4), *target);
  GateConfig cfg;
  std::mt19937 rng(11);
  for (int n : {9, 17, 30}) {  // the window is 8
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(rng() % 512));
    for (int i = 0; i < 4; ++i) ids.push_back(ids[i]);
    cfg.prompts.push_back(ids);
  }
  cfg.max_tokens = 24;
  cfg.lookup_widths = {};
  cfg.assistant = assistant.get();
  const GateReport r = run_gate(*target, cfg);
  size_t assistant_cases = 0;
  int64_t drafted = 0;
  for (const GateCase& c : r.cases) {
    EXPECT_TRUE(c.identical) << c.mode << " prompt " << c.prompt << " temp " << c.temperature
                             << " first diff " << c.first_diff;
    if (c.mode.rfind("assistant/w", 0) == 0) {
      ++assistant_cases;
      drafted += c.spec.drafted;
    }
  }
  EXPECT_EQ(assistant_cases, 3u * 2u * 4u);  // prompts x temperatures x widths
  EXPECT_GT(drafted, 0);
}

}  // namespace
}  // namespace lockstep
