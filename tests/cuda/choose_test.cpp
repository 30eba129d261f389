// Backend::choose_tokens on the GPU (kernels/cuda/choose.cu) against the host Sampler, bit for
// bit: the device Gumbel noise for every one of the 2^24 uniforms, the counter-based uniforms,
// every id's score under penalties and temperature, and the chosen ids for many rows and rules
// (V = 151936, ties, all-equal rows, -inf, NaN, filtered rows on the host fallback), whatever the
// number of rows in the call, eagerly and inside a recorded (graph) step; rows with an
// allowed-token mask (TokenRule::allowed: random densities, one allowed id, all but one, a mask
// shorter than the row) against the host's choice under the same mask.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/backend.h"
#include "constraints/token_mask.h"
#include "core/error.h"
#include "kernels/token_choice.h"
#include "sampling/sampler.h"

namespace lockstep::kernels::cuda::test {
namespace {

using Choose = CudaTest;

TEST_F(Choose, GumbelNoiseIsTheHostsForEveryUniform) {
  const size_t n = size_t{1} << 24;
  DeviceBuffer<float> out(n);
  testing::gumbel_table(out.get());
  const std::vector<float> got = out.to_host();
  size_t bad = 0, first_bad = 0;
  for (size_t k = 0; k < n; ++k) {
    const float u = choice::mul(choice::add(static_cast<float>(k), 0.5f), 1.0f / 16777216.0f);
    const float want = choice::gumbel(u);
    if (!same_bits(&want, &got[k], 1) && bad++ == 0) first_bad = k;
  }
  EXPECT_EQ(bad, 0u) << "first at k = " << first_bad;
}

TEST_F(Choose, PositionUniformsAreTheHosts) {
  const int64_t n = 4099;
  DeviceBuffer<float> out(n);
  for (uint64_t seed : {0ull, 1ull, 0xdeadbeefcafef00dull})
    for (int64_t pos : {int64_t{0}, int64_t{1}, int64_t{4095}, int64_t{1} << 40}) {
      testing::position_uniforms(seed, pos, n, out.get());
      const std::vector<float> got = out.to_host();
      for (int64_t id = 0; id < n; ++id) {
        const float want = choice::position_uniform(seed, pos, static_cast<int32_t>(id));
        ASSERT_TRUE(same_bits(&want, &got[id], 1)) << seed << " " << pos << " " << id;
      }
    }
}

// Logits with the awkward cases.
std::vector<float> tricky_row(int64_t V, int kind, std::mt19937& rng) {
  std::normal_distribution<float> n(0, 3);
  std::uniform_int_distribution<int> small(0, 3);
  std::vector<float> v(V);
  for (auto& x : v) x = n(rng);
  if (kind == 1)
    for (auto& x : v) x = static_cast<float>(small(rng));  // many ties
  if (kind == 2) std::fill(v.begin(), v.end(), 1.25f);     // all equal
  if (kind == 3)
    for (auto& x : v) {
      if (small(rng) == 0) x = -INFINITY;
    }
  if (kind == 4) std::fill(v.begin(), v.end(), -INFINITY);
  if (kind == 5) {
    v[rng() % V] = NAN;
    v[V - 1] = NAN;
  }
  if (kind == 6) v[0] = NAN;
  if (kind == 7) {  // the maximum tied at the two ends of the row
    v[0] = 40.0f;
    v[V - 1] = 40.0f;
  }
  return v;
}

SamplingParams params_for(int kind, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0, 1);
  SamplingParams p;
  p.seed = rng();
  if (kind & 1) p.temperature = 0.05f + 2.0f * u(rng);
  if (kind & 2) {
    p.repetition_penalty = 0.5f + 1.5f * u(rng);
    p.presence_penalty = 4.0f * u(rng) - 2.0f;
    p.frequency_penalty = 4.0f * u(rng) - 2.0f;
  }
  if ((kind & 4) && (kind & 1)) {  // filters: the host fallback rows
    const int f = static_cast<int>(rng() % 3);
    if (f == 0) p.top_k = 1 + static_cast<int>(rng() % 40);
    if (f == 1) p.top_p = 0.1f + 0.8f * u(rng);
    if (f == 2) p.min_p = 0.3f * u(rng);
  }
  return p;
}

struct Case {
  std::vector<float> logits;  // [rows][V]
  std::vector<Sampler> samplers;
  std::vector<std::vector<int32_t>> histories;
  std::vector<int64_t> prompt_lens;
  std::vector<std::vector<TokenAdjust>> adjust;
  std::vector<TokenRule> rules;
  std::vector<int32_t> want;  // Sampler::choose on the host
};

Case make_case(int64_t V, int rows, std::mt19937& rng) {
  Case c;
  c.histories.resize(rows);
  c.adjust.resize(rows);
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> row = tricky_row(V, static_cast<int>(rng() % 8), rng);
    c.logits.insert(c.logits.end(), row.begin(), row.end());
    c.samplers.emplace_back(params_for(static_cast<int>(rng() % 8), rng));
    auto& h = c.histories[r];
    const int len = 1 + static_cast<int>(rng() % 300);
    for (int i = 0; i < len; ++i) h.push_back(static_cast<int32_t>(rng() % V));
    if (rng() % 3 == 0) h.push_back(0);  // id 0 penalised: the first-candidate rule
    c.prompt_lens.push_back(static_cast<int64_t>(rng() % h.size()));
  }
  for (int r = 0; r < rows; ++r) {
    const TokenHistory hist{c.histories[r], c.prompt_lens[r]};
    const int64_t pos = static_cast<int64_t>(c.histories[r].size());
    c.rules.push_back(c.samplers[r].rule(hist, pos, V, c.adjust[r]));
    c.want.push_back(c.samplers[r].choose(
        {c.logits.data() + r * V, static_cast<size_t>(V)}, hist, pos));
  }
  return c;
}

std::vector<int32_t> choose_on_device(const float* logits, int64_t V,
                                      std::span<const TokenRule> rules) {
  std::vector<int32_t> ids(rules.size(), -2);
  choose_tokens(logits, V, rules, ids.data());
  return ids;
}

TEST_F(Choose, ScoresAreTheHostsBitwise) {
  std::mt19937 rng(3);
  const int64_t V = 151936;
  for (int trial = 0; trial < 8; ++trial) {
    Case c = make_case(V, 1, rng);
    TokenRule rule = c.rules[0];
    if (trial % 2 == 1 && rule.greedy()) rule.temperature = 0.9f;
    DeviceBuffer<float> logits(c.logits), out(V);
    testing::choice_scores(logits.get(), V, rule, out.get());
    const std::vector<float> got = out.to_host();
    size_t bad = 0;
    for (int64_t id = 0; id < V; ++id) {
      float v = c.logits[id];
      for (const TokenAdjust& a : rule.adjust)
        if (a.id == id)
          v = choice::penalized(v, a.output_count, a.seen, rule.repetition_penalty,
                                rule.presence_penalty, rule.frequency_penalty);
      const float want = rule.greedy() ? v
                                       : choice::gumbel_score(v, rule.temperature, rule.seed,
                                                              rule.position,
                                                              static_cast<int32_t>(id));
      // A NaN score is bitwise only up to its payload (the GPU's arithmetic returns the
      // canonical NaN, the host's propagates the input's); NaN never wins either way.
      if (std::isnan(want) && std::isnan(got[id])) continue;
      if (!same_bits(&want, &got[id], 1) && bad++ == 0)
        ADD_FAILURE() << "trial " << trial << " id " << id << ": " << got[id] << " vs host "
                      << want;
    }
    EXPECT_EQ(bad, 0u) << "trial " << trial;
  }
}

TEST_F(Choose, IdsAreTheSamplersAndIndependentOfTheRowsInTheCall) {
  std::mt19937 rng(5);
  for (int64_t V : {int64_t{1}, int64_t{3}, int64_t{4096}, int64_t{4097}, int64_t{151936}}) {
    const int rows = V > 5000 ? 40 : 64;
    Case c = make_case(V, rows, rng);
    DeviceBuffer<float> logits(c.logits);
    EXPECT_EQ(choose_on_device(logits.get(), V, c.rules), c.want) << "V " << V;
    // Each row alone, and in groups of 3, give the same ids.
    for (int r = 0; r < rows; ++r) {
      const auto one = choose_on_device(logits.get() + r * V, V, {&c.rules[r], 1});
      EXPECT_EQ(one[0], c.want[r]) << "V " << V << " row " << r;
    }
    for (int r = 0; r + 3 <= rows; r += 3) {
      const auto three = choose_on_device(logits.get() + r * V, V, {&c.rules[r], 3});
      EXPECT_EQ(three, std::vector<int32_t>(c.want.begin() + r, c.want.begin() + r + 3));
    }
  }
}

TEST_F(Choose, SkippedRowsAndTheCpuBackendAgree) {
  std::mt19937 rng(9);
  const int64_t V = 151936;
  Case c = make_case(V, 12, rng);
  c.rules[3].skip = true;
  c.want[3] = -1;
  DeviceBuffer<float> logits(c.logits);
  EXPECT_EQ(choose_on_device(logits.get(), V, c.rules), c.want);
  auto cpu = make_cpu_backend();
  std::vector<int32_t> ids(c.rules.size());
  cpu->choose_tokens(c.logits.data(), V, c.rules, ids.data());
  EXPECT_EQ(ids, c.want);
}

// Inside recorded steps: eager, captured, replayed twice; the logits change (a staged upload
// recorded in the graph) and so do the rules, and every step's ids are the host's.
TEST_F(Choose, WorksAfterARecordedStep) {
  auto be = make_cuda_backend();
  std::mt19937 rng(13);
  const int64_t V = 32000;
  const int rows = 4;
  for (int step = 0; step < 5; ++step) {
    Case c = make_case(V, rows, rng);
    std::vector<int32_t> ids(rows, -2);
    be->begin_step("choose-test");
    {
      Floats logits = be->array<float>(rows * V);
      be->upload(logits.data(), c.logits.data(), c.logits.size() * sizeof(float));
      Floats copy = be->array<float>(rows * V);
      be->copy(copy.data(), logits.data(), c.logits.size() * sizeof(float));
      be->choose_tokens(copy.data(), V, c.rules, ids.data());
    }
    be->end_step(true);
    EXPECT_EQ(ids, c.want) << "step " << step;
  }
}

// A constraint's mask of one of the shapes a grammar gives (kind 6: none).
constraints::TokenMask mask_for(int kind, int64_t V, std::mt19937& rng) {
  // Kind 5: a mask over fewer ids than the row (a lm_head padded past the tokenizer).
  const auto size = static_cast<int32_t>(kind == 5 ? V - std::min<int64_t>(V - 1, 77) : V);
  constraints::TokenMask m(size);
  auto any = [&] { return static_cast<int32_t>(rng() % static_cast<uint32_t>(size)); };
  if (kind <= 2 || kind == 5) {
    const double keep = kind == 0 ? 0.5 : kind == 1 ? 0.03 : 0.0005;
    std::bernoulli_distribution b(keep);
    for (int32_t i = 0; i < size; ++i)
      if (b(rng)) m.set(i);
    if (m.count() == 0) m.set(any());
  } else if (kind == 3) {
    m.set(any());  // one allowed id
  } else if (kind == 4) {
    const int32_t gone = any();  // all but one
    for (int32_t i = 0; i < size; ++i)
      if (i != gone) m.set(i);
  }
  return m;
}

TEST_F(Choose, MaskedRowsAreTheHostsMaskedChoice) {
  std::mt19937 rng(17);
  for (int64_t V : {int64_t{1}, int64_t{33}, int64_t{4097}, int64_t{151936}}) {
    const int rows = V > 5000 ? 48 : 64;
    Case c = make_case(V, rows, rng);
    std::vector<constraints::TokenMask> masks(rows);
    int masked = 0, checked_with_sampler = 0;
    for (int r = 0; r < rows; ++r) {
      const int kind = static_cast<int>(rng() % 7);
      if (kind == 6) continue;  // unmasked rows mixed in
      masks[r] = mask_for(kind, V, rng);
      c.rules[r].allowed = masks[r].words().data();
      c.rules[r].allowed_size = masks[r].size();
      ++masked;
      const std::span<const float> row(c.logits.data() + r * V, static_cast<size_t>(V));
      ChoiceScratch scratch;
      c.want[r] = choose_token(row, c.rules[r], scratch);  // the host, the same mask
      // Where an allowed id has a finite logit, the Sampler's masked choice is the same id.
      try {
        const TokenHistory hist{c.histories[r], c.prompt_lens[r]};
        const int32_t s = c.samplers[r].choose(row, hist, c.rules[r].position, masks[r]);
        EXPECT_EQ(s, c.want[r]) << "V " << V << " row " << r;
        ++checked_with_sampler;
      } catch (const Error&) {
        EXPECT_FALSE(masks[r].test(c.want[r])) << "V " << V << " row " << r;
      }
    }
    EXPECT_GT(masked, rows / 2);
    EXPECT_GT(checked_with_sampler, masked / 2);
    DeviceBuffer<float> logits(c.logits);
    EXPECT_EQ(choose_on_device(logits.get(), V, c.rules), c.want) << "V " << V;
    for (int r = 0; r < rows; ++r) {
      const auto one = choose_on_device(logits.get() + r * V, V, {&c.rules[r], 1});
      EXPECT_EQ(one[0], c.want[r]) << "V " << V << " row " << r;
    }
    auto cpu = make_cpu_backend();
    std::vector<int32_t> ids(c.rules.size());
    cpu->choose_tokens(c.logits.data(), V, c.rules, ids.data());
    EXPECT_EQ(ids, c.want) << "V " << V;
  }
}

// The mask decides against the logits: a forbidden id with the row's largest logit (and +inf)
// never wins, on every sampling kind, and one allowed id always wins where its logit is finite.
TEST_F(Choose, AForbiddenMaximumNeverWins) {
  std::mt19937 rng(23);
  const int64_t V = 151936;
  const int rows = 32;
  Case c = make_case(V, rows, rng);
  std::vector<constraints::TokenMask> masks(rows);
  for (int r = 0; r < rows; ++r) {
    std::normal_distribution<float> n(0, 3);
    for (int64_t id = 0; id < V; ++id) c.logits[r * V + id] = n(rng);
    const auto top = static_cast<int32_t>(rng() % V);
    c.logits[r * V + top] = r % 2 ? INFINITY : 1e30f;
    masks[r] = mask_for(r % 2 ? 3 : 4, V, rng);
    if (masks[r].test(top)) {  // make the maximum forbidden
      constraints::TokenMask m(static_cast<int32_t>(V));
      for (int32_t i = 0; i < V; ++i)
        if (masks[r].test(i) && i != top) m.set(i);
      if (m.count() == 0) m.set((top + 1) % static_cast<int32_t>(V));
      masks[r] = m;
    }
    c.rules[r].allowed = masks[r].words().data();
    c.rules[r].allowed_size = masks[r].size();
    ChoiceScratch scratch;
    c.want[r] = choose_token({c.logits.data() + r * V, static_cast<size_t>(V)}, c.rules[r],
                             scratch);
    EXPECT_NE(c.want[r], top);
    EXPECT_TRUE(masks[r].test(c.want[r]));
  }
  DeviceBuffer<float> logits(c.logits);
  EXPECT_EQ(choose_on_device(logits.get(), V, c.rules), c.want);
}

// Masked rows after a recorded step, the masks changing each step like a grammar's.
TEST_F(Choose, MaskedRowsWorkAfterARecordedStep) {
  auto be = make_cuda_backend();
  std::mt19937 rng(29);
  const int64_t V = 151936;
  const int rows = 3;
  for (int step = 0; step < 5; ++step) {
    Case c = make_case(V, rows, rng);
    std::vector<constraints::TokenMask> masks(rows);
    for (int r = 0; r < rows; ++r) {
      masks[r] = mask_for((step + r) % 6, V, rng);
      c.rules[r].allowed = masks[r].words().data();
      c.rules[r].allowed_size = masks[r].size();
      ChoiceScratch scratch;
      c.want[r] = choose_token({c.logits.data() + r * V, static_cast<size_t>(V)}, c.rules[r],
                               scratch);
    }
    std::vector<int32_t> ids(rows, -2);
    be->begin_step("choose-mask-test");
    {
      Floats logits = be->array<float>(rows * V);
      be->upload(logits.data(), c.logits.data(), c.logits.size() * sizeof(float));
      be->choose_tokens(logits.data(), V, c.rules, ids.data());
    }
    be->end_step(true);
    EXPECT_EQ(ids, c.want) << "step " << step;
  }
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
