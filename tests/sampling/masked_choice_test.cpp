// Sampler::choose under a constraint mask: the token is always allowed, the mask comes before
// penalties and filters (top-k / top-p / min-p select among allowed tokens), and a seeded choice
// is a function of (logits, mask, history, seed, position) alone. A rule carrying the mask
// (TokenRule::allowed, what a backend chooses with) gives the same id as the host's masked choice.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "constraints/token_mask.h"
#include "core/error.h"
#include "kernels/backend.h"
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

// The masks a backend sees: random densities, one allowed token, all but one, and the padded ids
// past a mask shorter than the row.
std::vector<constraints::TokenMask> edge_masks(uint32_t seed, int32_t size) {
  std::mt19937 rng(seed);
  std::vector<constraints::TokenMask> out;
  for (double keep : {0.5, 0.05, 0.002}) {
    std::bernoulli_distribution b(keep);
    constraints::TokenMask m(size);
    for (int32_t i = 0; i < size; ++i)
      if (b(rng)) m.set(i);
    if (m.count() == 0) m.set(static_cast<int32_t>(rng() % size));
    out.push_back(std::move(m));
  }
  constraints::TokenMask one(size);
  one.set(static_cast<int32_t>(rng() % size));
  out.push_back(one);
  constraints::TokenMask last(size);
  last.set(size - 1);  // the highest id only (the tail word's last bit)
  out.push_back(last);
  constraints::TokenMask all_but_one(size);
  const auto gone = static_cast<int32_t>(rng() % size);
  for (int32_t i = 0; i < size; ++i)
    if (i != gone) all_but_one.set(i);
  out.push_back(all_but_one);
  return out;
}

TEST(MaskedChoice, RuleWithTheMaskEqualsTheHostMaskedChoice) {
  // V = kV + 37: not a multiple of 32 or 64, and the masks cover only kV ids (padded rows).
  const int32_t V = kV + 37;
  const std::vector<int32_t> history = {3, 17, 17, 400, 999, 5, 5, 1010};
  std::vector<SamplingParams> params = rules();
  params.push_back(params[5]);
  params.back().top_k = 0;  // penalties, unfiltered (the GPU kernel's own path)
  params.back().frequency_penalty = -0.7f;
  params.push_back(params[4]);
  params.back().top_p = 0.7f;
  params.back().temperature = 1.7f;
  auto be = kernels::make_cpu_backend();
  int compared = 0;
  for (const SamplingParams& p : params) {
    for (uint32_t seed = 1; seed <= 6; ++seed) {
      std::mt19937 rng(seed);
      std::normal_distribution<float> d(0, 3);
      std::vector<float> logits(V);
      for (auto& x : logits) x = d(rng);
      logits[seed * 31] = INFINITY;  // an allowed or forbidden +inf; ties of maxima below
      logits[seed * 37] = logits[seed * 41] = 9.0f;
      for (const auto& mask : edge_masks(seed, kV)) {
        const int64_t pos = 11 + seed;
        const TokenHistory h{history, 3};
        Sampler host(p);
        const int32_t want = host.choose(logits, h, pos, mask);
        ASSERT_TRUE(mask.test(want));
        std::vector<kernels::TokenAdjust> adjust;
        kernels::TokenRule r = host.rule(h, pos, V, adjust);
        r.allowed = mask.words().data();
        r.allowed_size = mask.size();
        for (int32_t id = 0; id < V; ++id) ASSERT_EQ(r.allows(id), mask.test(id)) << id;
        kernels::ChoiceScratch scratch;
        EXPECT_EQ(kernels::choose_token(logits, r, scratch), want)
            << "temperature " << p.temperature << " top_k " << p.top_k << " seed " << seed;
        // ... and the same as the rule without a mask on logits with -inf outside it.
        std::vector<float> masked = logits;
        for (int32_t i = 0; i < V; ++i)
          if (!mask.test(i)) masked[i] = -INFINITY;
        kernels::TokenRule plain = r;
        plain.allowed = nullptr;
        EXPECT_EQ(kernels::choose_token(masked, plain, scratch), want);
        // The CPU backend's choose_tokens, two rows with different masks in one call.
        std::vector<float> two(logits);
        two.insert(two.end(), logits.begin(), logits.end());
        const kernels::TokenRule both[2] = {r, plain};
        int32_t ids[2];
        be->choose_tokens(two.data(), V, both, ids);
        EXPECT_EQ(ids[0], want);
        EXPECT_EQ(ids[1], kernels::choose_token(logits, plain, scratch));
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, static_cast<int>(params.size()) * 6 * 6);
}

TEST(MaskedChoice, RuleWithAnEmptyMaskAllowsNothingButStillChooses) {
  // Like the host's all -inf row: the lowest id among equal -inf scores, which the decoder then
  // refuses (it is not allowed), as Sampler::choose with the mask does.
  const std::vector<float> logits(100, 1.0f);
  constraints::TokenMask none(100);
  kernels::TokenRule r;
  static const uint64_t kZero = 0;
  r.allowed = &kZero;
  r.allowed_size = 0;
  kernels::ChoiceScratch scratch;
  EXPECT_EQ(kernels::choose_token(logits, r, scratch), 0);
  Sampler s({});
  EXPECT_THROW(s.choose(logits, {}, 0, none), Error);
}

}  // namespace
}  // namespace lockstep
