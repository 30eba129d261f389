// Sampler::choose under a constraint mask: the token is always allowed, the mask comes before
// penalties and filters (top-k / top-p / min-p select among allowed tokens), and a seeded choice
// is a function of (logits, mask, history, seed, position) alone.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "constraints/token_mask.h"
#include "core/error.h"
#include "sampling/sampler.h"

namespace lockstep {
namespace {

constexpr int kV = 1000;

std::vector<float> random_logits(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, 3);
  std::vector<float> v(kV);
  for (auto& x : v) x = d(rng);
  return v;
}

constraints::TokenMask random_mask(uint32_t seed, double keep) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution b(keep);
  constraints::TokenMask m(kV);
  for (int32_t i = 0; i < kV; ++i)
    if (b(rng)) m.set(i);
  if (m.count() == 0) m.set(static_cast<int32_t>(seed % kV));
  return m;
}

std::vector<SamplingParams> rules() {
  std::vector<SamplingParams> out(6);
  out[1].temperature = 0.8f;
  out[1].seed = 7;
  out[2] = out[1];
  out[2].top_k = 5;
  out[3] = out[1];
  out[3].top_p = 0.5f;
  out[4] = out[1];
  out[4].min_p = 0.2f;
  out[5] = out[1];
  out[5].repetition_penalty = 1.3f;
  out[5].presence_penalty = 0.5f;
  out[5].top_k = 20;
  return out;
}

TEST(MaskedChoice, AlwaysChoosesAnAllowedTokenAndEqualsChoosingOnMaskedLogits) {
  const std::vector<int32_t> history = {3, 17, 17, 400, 999};
  for (const SamplingParams& p : rules()) {
    for (uint32_t seed = 1; seed <= 40; ++seed) {
      const auto logits = random_logits(seed);
      const auto mask = random_mask(seed * 13, seed % 4 == 0 ? 0.003 : 0.3);
      Sampler s(p);
      const int64_t pos = 5 + seed;
      const int32_t t = s.choose(logits, {history, 2}, pos, mask);
      EXPECT_TRUE(mask.test(t)) << "seed " << seed << " temp " << p.temperature;
      // The same as the unmasked rule on logits with -inf outside the mask (mask first).
      std::vector<float> masked = logits;
      for (int32_t i = 0; i < kV; ++i)
        if (!mask.test(i)) masked[i] = -INFINITY;
      EXPECT_EQ(t, s.choose(masked, {history, 2}, pos));
      // Reproducible: a fresh sampler, the same inputs.
      Sampler again(p);
      EXPECT_EQ(t, again.choose(logits, {history, 2}, pos, mask));
    }
  }
}

TEST(MaskedChoice, GreedyIsTheBestAllowedToken) {
  const auto logits = random_logits(5);
  const auto mask = random_mask(6, 0.1);
  int32_t best = -1;
  for (int32_t i = 0; i < kV; ++i)
    if (mask.test(i) && (best < 0 || logits[i] > logits[best])) best = i;
  Sampler s({});
  EXPECT_EQ(s.choose(logits, {}, 0, mask), best);
}

TEST(MaskedChoice, FiltersSelectAmongAllowedTokens) {
  // The five most likely tokens are all forbidden: top-k 5 applied before the mask would leave
  // nothing; mask first, it keeps the five best allowed ones, and only those are ever chosen.
  std::vector<float> logits(kV, 0.0f);
  for (int32_t i = 0; i < 5; ++i) logits[i] = 10.0f;
  for (int32_t i = 5; i < 10; ++i) logits[i] = 1.0f;
  constraints::TokenMask mask(kV);
  for (int32_t i = 5; i < kV; ++i) mask.set(i);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 5;
  std::map<int32_t, int> seen;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    p.seed = seed;
    Sampler s(p);
    ++seen[s.choose(logits, {}, 3, mask)];
  }
  for (const auto& [id, n] : seen) EXPECT_TRUE(id >= 5 && id < 10) << id;
  EXPECT_EQ(seen.size(), 5u);
  // top-p over the renormalised allowed distribution: the single allowed token of mass ~1.
  std::vector<float> l2(kV, 0.0f);
  l2[0] = 50.0f;
  l2[7] = 20.0f;
  p.top_k = 0;
  p.top_p = 0.9f;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    p.seed = seed;
    Sampler s(p);
    EXPECT_EQ(s.choose(l2, {}, 1, mask), 7);
  }
}

TEST(MaskedChoice, MaskShorterThanTheRowForbidsThePaddedIds) {
  // A model vocabulary padded past the tokenizer's: ids past the mask are never chosen.
  std::vector<float> logits(kV + 24, 0.0f);
  logits[kV + 3] = 100.0f;
  constraints::TokenMask mask(kV);
  mask.set(42);
  mask.set(43);
  Sampler s({});
  EXPECT_EQ(s.choose(logits, {}, 0, mask), 42);
}

TEST(MaskedChoice, RefusesWhenNoAllowedTokenHasAFiniteLogit) {
  std::vector<float> logits(kV, 1.0f);
  logits[9] = -INFINITY;
  constraints::TokenMask mask(kV);
  mask.set(9);
  Sampler s({});
  EXPECT_THROW(s.choose(logits, {}, 0, mask), Error);
}

}  // namespace
}  // namespace lockstep
