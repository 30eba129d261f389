// logit_bias in the sampler: the choice with a bias is the choice without one on the biased
// logits (greedy and sampled), masks stay masks, and bad biases are refused.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "sampling/sampler.h"

namespace lockstep {
namespace {

std::vector<float> row() { return {0.5f, 2.0f, 1.9f, -1.0f, 0.0f, 1.0f}; }

TEST(LogitBias, IsAddedToTheLogitsBeforeTheChoice) {
  const std::vector<int32_t> hist = {1, 2};
  const TokenHistory h{hist, 1};
  for (float temperature : {0.0f, 0.7f}) {
    SamplingParams p;
    p.temperature = temperature;
    p.seed = 9;
    p.top_k = 4;
    p.logit_bias = {{1, -100.0f}, {3, 2.5f}};
    Sampler biased(p);
    SamplingParams q = p;
    q.logit_bias.clear();
    Sampler plain(q);
    std::vector<float> shifted = row();
    shifted[1] -= 100.0f;
    shifted[3] += 2.5f;
    for (int64_t pos = 2; pos < 40; ++pos)
      EXPECT_EQ(biased.choose(row(), h, pos), plain.choose(shifted, h, pos)) << temperature << " " << pos;
  }
  SamplingParams greedy;
  greedy.logit_bias = {{1, -100.0f}};
  EXPECT_EQ(Sampler(greedy).choose(row(), {}, 0), 2);
  greedy.logit_bias = {{4, 100.0f}};
  EXPECT_EQ(Sampler(greedy).choose(row(), {}, 0), 4);
}

TEST(LogitBias, DoesNotLiftAMaskedToken) {
  SamplingParams p;
  p.logit_bias = {{1, 100.0f}};
  Sampler s(p);
  constraints::TokenMask mask(static_cast<int32_t>(row().size()));
  mask.set(0);
  mask.set(5);
  EXPECT_EQ(s.choose(row(), {}, 0, mask), 5);
}

TEST(LogitBias, RefusesBadBiases) {
  SamplingParams p;
  p.logit_bias = {{2, 100.5f}};
  EXPECT_THROW(p.validate(), Error);
  p.logit_bias = {{3, 1.0f}, {2, 1.0f}};
  EXPECT_THROW(p.validate(), Error);
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_THROW(p.validate(), Error);
  p.logit_bias = {{0, -100.0f}, {7, 100.0f}};
  EXPECT_NO_THROW(p.validate());
}

}  // namespace
}  // namespace lockstep
