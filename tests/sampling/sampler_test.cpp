// Sampler: greedy tie rule, seed reproducibility, position keying, filters and penalties.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "core/error.h"
#include "sampling/sampler.h"

namespace lockstep {
namespace {

std::vector<float> random_logits(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, 2);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Sampler, GreedyTiesGoToLowestId) {
  Sampler s({});
  std::vector<float> l = {1, 3, 0, 3, 3};
  EXPECT_EQ(s.choose(l, {}, 0), 1);
}

TEST(Sampler, SeededChoiceDependsOnlyOnSeedPositionAndLogits) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.seed = 42;
  const auto logits = random_logits(1000, 1);
  Sampler a(p), b(p);
  std::vector<int32_t> h1 = {1, 2, 3}, h2 = {9, 9, 9};
  // Same position, different (penalty-free) history: same token; fresh sampler: same token.
  EXPECT_EQ(a.choose(logits, {h1, 3}, 3), b.choose(logits, {h2, 3}, 3));
  // Different positions or seeds draw different noise: over many positions the choices vary.
  std::map<int32_t, int> seen;
  for (int pos = 0; pos < 50; ++pos) ++seen[a.choose(logits, {}, pos)];
  EXPECT_GT(seen.size(), 3u);
}

TEST(Sampler, GumbelMaxFollowsTheSoftmax) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  Sampler s(p);
  int counts[3] = {};
  const int n = 20000;
  for (int pos = 0; pos < n; ++pos) ++counts[s.choose(logits, {}, pos)];
  EXPECT_NEAR(counts[0] / double(n), 0.5, 0.02);
  EXPECT_NEAR(counts[1] / double(n), 0.3, 0.02);
  EXPECT_NEAR(counts[2] / double(n), 0.2, 0.02);
}

TEST(Sampler, FiltersRestrictTheCandidates) {
  const auto logits = random_logits(500, 3);
  int32_t best = 0;
  for (int i = 1; i < 500; ++i)
    if (logits[i] > logits[best]) best = i;
  SamplingParams p;
  p.temperature = 1.5f;
  p.top_k = 1;
  Sampler k1(p);
  for (int pos = 0; pos < 20; ++pos) EXPECT_EQ(k1.choose(logits, {}, pos), best);
  p.top_k = 0;
  p.top_p = 1e-6f;
  Sampler tp(p);
  for (int pos = 0; pos < 20; ++pos) EXPECT_EQ(tp.choose(logits, {}, pos), best);
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  Sampler mp(p);
  for (int pos = 0; pos < 20; ++pos) EXPECT_EQ(mp.choose(logits, {}, pos), best);
}

TEST(Sampler, PenaltiesUseTheHistory) {
  std::vector<float> logits = {2.0f, 1.9f, 0.0f};
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  Sampler s(p);
  std::vector<int32_t> hist = {0};
  EXPECT_EQ(s.choose(logits, {hist, 1}, 1), 1);  // 2.0 / 1.5 < 1.9
  SamplingParams q;
  q.presence_penalty = 0.5f;
  Sampler pres(q);
  EXPECT_EQ(pres.choose(logits, {hist, 1}, 1), 0);  // prompt tokens are not penalised
  EXPECT_EQ(pres.choose(logits, {hist, 0}, 1), 1);  // output tokens are
}

TEST(Sampler, InvalidParametersNameTheParameter) {
  SamplingParams p;
  p.top_p = 0.0f;
  try {
    Sampler s(p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos);
  }
  p = {};
  p.temperature = -1;
  EXPECT_THROW(Sampler{p}, Error);
}

}  // namespace
}  // namespace lockstep
