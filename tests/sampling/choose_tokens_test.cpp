// Backend::choose_tokens on the CPU backend against the host Sampler, and the Sampler against the
// algorithm it had before the scoring math moved to kernels/token_choice.h (seeded outputs must
// not change). Also checks, on the host, the argument the GPU kernel rests on: an argmax that
// skips NaN scores, merges chunk winners in any order, and falls back to id 0 when id 0's own
// score is NaN gives exactly the sequential loop's id.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <unordered_map>
#include <vector>

#include "kernels/backend.h"
#include "kernels/math.h"
#include "kernels/schedule.h"
#include "kernels/token_choice.h"
#include "sampling/sampler.h"

namespace lockstep {
namespace {

// Sampler::choose as it was before this change (the oracle for "nothing moved").
int32_t legacy_choose(const SamplingParams& p, std::span<const float> logits,
                      const TokenHistory& history, int64_t position) {
  const int64_t V = static_cast<int64_t>(logits.size());
  std::vector<float> work_(logits.begin(), logits.end());
  if (p.has_penalties()) {
    std::unordered_map<int32_t, int32_t> out_counts;
    for (size_t i = static_cast<size_t>(history.prompt_len); i < history.tokens.size(); ++i)
      ++out_counts[history.tokens[i]];
    if (p.repetition_penalty != 1.0f) {
      std::vector<bool> seen(V, false);
      for (int32_t t : history.tokens)
        if (t >= 0 && t < V && !seen[t]) {
          seen[t] = true;
          work_[t] = work_[t] > 0 ? work_[t] / p.repetition_penalty : work_[t] * p.repetition_penalty;
        }
    }
    for (const auto& [t, n] : out_counts)
      if (t >= 0 && t < V)
        work_[t] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(n);
  }
  auto better = [&](int32_t a, int32_t b) {
    return work_[a] > work_[b] || (work_[a] == work_[b] && a < b);
  };
  if (p.greedy()) {
    int32_t best = 0;
    for (int32_t i = 1; i < V; ++i)
      if (work_[i] > work_[best]) best = i;
    return best;
  }
  for (auto& w : work_) w /= p.temperature;
  std::vector<int32_t> ids_(V);
  for (int32_t i = 0; i < V; ++i) ids_[i] = i;
  if (p.top_k > 0 || p.top_p < 1.0f || p.min_p > 0.0f) {
    const int64_t k = p.top_k > 0 ? std::min<int64_t>(p.top_k, V) : V;
    std::partial_sort(ids_.begin(), ids_.begin() + k, ids_.end(), better);
    ids_.resize(k);
    if (p.top_p < 1.0f || p.min_p > 0.0f) {
      const float mx = work_[ids_[0]];
      std::vector<float> e(ids_.size());
      float lanes[kernels::kLanes] = {};
      for (size_t i = 0; i < ids_.size(); ++i) {
        e[i] = kernels::exp_f32(work_[ids_[i]] - mx);
        lanes[i % kernels::kLanes] += e[i];
      }
      const float total = kernels::fold_lanes(lanes);
      size_t keep = ids_.size();
      if (p.min_p > 0.0f) {
        const float threshold = p.min_p * e[0];
        keep = 1;
        while (keep < ids_.size() && e[keep] >= threshold) ++keep;
      }
      if (p.top_p < 1.0f) {
        float cum = 0.0f;
        size_t n = 0;
        while (n < keep) {
          cum += e[n] / total;
          ++n;
          if (cum >= p.top_p) break;
        }
        keep = std::max<size_t>(1, n);
      }
      ids_.resize(keep);
    }
  }
  int32_t best = -1;
  float best_score = -INFINITY;
  for (int32_t id : ids_) {
    const float u = position_uniform(p.seed, position, id);
    const float gumbel = -kernels::log_f32(-kernels::log_f32(u));
    const float score = work_[id] + gumbel;
    if (best < 0 || score > best_score || (score == best_score && id < best)) {
      best = id;
      best_score = score;
    }
  }
  return best;
}

// Logits with the awkward cases: ties (values from a small set), -inf, +inf, NaN, all equal.
std::vector<float> tricky_logits(int64_t V, int kind, std::mt19937& rng) {
  std::vector<float> v(V);
  std::normal_distribution<float> n(0, 3);
  std::uniform_int_distribution<int> small(0, 4);
  for (auto& x : v) x = n(rng);
  switch (kind) {
    case 1:  // many ties
      for (auto& x : v) x = static_cast<float>(small(rng));
      break;
    case 2:  // all equal
      std::fill(v.begin(), v.end(), 0.5f);
      break;
    case 3:
      for (auto& x : v) {
        if (small(rng) == 0) x = -INFINITY;
      }
      break;
    case 4:
      std::fill(v.begin(), v.end(), -INFINITY);
      break;
    case 5:
      v[rng() % V] = NAN;
      v[rng() % V] = NAN;
      break;
    case 6:  // the first candidate
      v[0] = NAN;
      break;
    case 7:
      v[rng() % V] = INFINITY;
      v[rng() % V] = INFINITY;
      break;
    case 8:
      v[rng() % V] = -0.0f;
      v[rng() % V] = 0.0f;
      break;
    default:
      break;
  }
  return v;
}

SamplingParams random_params(int kind, std::mt19937& rng) {
  SamplingParams p;
  std::uniform_real_distribution<float> u(0, 1);
  p.seed = rng();
  if (kind % 2 == 1) p.temperature = 0.1f + 2.0f * u(rng);
  if (kind / 2 % 2 == 1) {
    p.repetition_penalty = 0.5f + 1.5f * u(rng);
    p.presence_penalty = 4.0f * u(rng) - 2.0f;
    p.frequency_penalty = 4.0f * u(rng) - 2.0f;
  }
  if (kind / 4 % 2 == 1) {
    const int f = static_cast<int>(rng() % 3);
    if (f == 0) p.top_k = 1 + static_cast<int>(rng() % 50);
    if (f == 1) p.top_p = 0.05f + 0.9f * u(rng);
    if (f == 2) p.min_p = 0.5f * u(rng);
  }
  return p;
}

TEST(ChooseTokens, CpuBackendEqualsSamplerAndLegacyOnRandomRows) {
  std::mt19937 rng(7);
  auto be = kernels::make_cpu_backend();
  int checked = 0;
  for (int64_t V : {1, 2, 7, 33, 1000, 4099}) {
    for (int trial = 0; trial < 48; ++trial) {
      const int rows = 1 + trial % 5;
      const SamplingParams p = random_params(trial % 8, rng);
      Sampler sampler(p);
      std::vector<float> logits;
      std::vector<std::vector<int32_t>> histories(rows);
      std::vector<std::vector<kernels::TokenAdjust>> adjust(rows);
      std::vector<kernels::TokenRule> rules;
      std::vector<int32_t> want;
      for (int r = 0; r < rows; ++r) {
        const std::vector<float> row = tricky_logits(V, static_cast<int>(rng() % 9), rng);
        logits.insert(logits.end(), row.begin(), row.end());
        auto& h = histories[r];
        const int len = 1 + static_cast<int>(rng() % 40);
        for (int i = 0; i < len; ++i) h.push_back(static_cast<int32_t>(rng() % (V + 3)) - 1);
        const TokenHistory hist{h, static_cast<int64_t>(rng() % (len + 1))};
        const int64_t pos = static_cast<int64_t>(h.size());
        rules.push_back(sampler.rule(hist, pos, V, adjust[r]));
        want.push_back(legacy_choose(p, row, hist, pos));
        EXPECT_EQ(sampler.choose(row, hist, pos), want.back()) << "V " << V << " trial " << trial;
      }
      std::vector<int32_t> got(rows, -2);
      be->choose_tokens(logits.data(), V, rules, got.data());
      EXPECT_EQ(got, want) << "V " << V << " trial " << trial;
      ++checked;
    }
  }
  EXPECT_GT(checked, 200);
}

TEST(ChooseTokens, SkippedRowsGiveMinusOne) {
  auto be = kernels::make_cpu_backend();
  std::vector<float> logits = {0, 1, 2, 5, 4, 3};
  std::vector<kernels::TokenRule> rules(2);
  rules[0].skip = true;
  std::vector<int32_t> got(2);
  be->choose_tokens(logits.data(), 3, rules, got.data());
  EXPECT_EQ(got, (std::vector<int32_t>{-1, 0}));
}

// The GPU kernel's reduction, on the host: NaN scores skipped, chunk winners merged in a shuffled
// order, id 0 when its own score is NaN or nothing is left.
int32_t tree_argmax(const std::vector<float>& score, int64_t chunk, std::mt19937& rng) {
  struct Best {
    float s;
    int32_t id;
  };
  const int64_t V = static_cast<int64_t>(score.size());
  std::vector<Best> winners;
  for (int64_t lo = 0; lo < V; lo += chunk) {
    Best b{0, -1};
    for (int64_t i = lo; i < std::min(V, lo + chunk); ++i) {
      if (std::isnan(score[i])) continue;
      if (b.id < 0 || kernels::choice::better(score[i], static_cast<int32_t>(i), b.s, b.id))
        b = {score[i], static_cast<int32_t>(i)};
    }
    winners.push_back(b);
  }
  std::shuffle(winners.begin(), winners.end(), rng);
  Best b{0, -1};
  for (const Best& w : winners)
    if (w.id >= 0 && (b.id < 0 || kernels::choice::better(w.s, w.id, b.s, b.id))) b = w;
  return std::isnan(score[0]) || b.id < 0 ? 0 : b.id;
}

TEST(ChooseTokens, ParallelReductionFormEqualsSequentialChoice) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t V = 1 + static_cast<int64_t>(rng() % 3000);
    const std::vector<float> row = tricky_logits(V, trial % 9, rng);
    kernels::TokenRule rule;
    if (trial % 2) {
      rule.temperature = 0.7f;
      rule.seed = rng();
      rule.position = trial;
    }
    std::vector<float> score(V);
    for (int64_t i = 0; i < V; ++i)
      score[i] = rule.greedy() ? row[i]
                               : kernels::choice::gumbel_score(row[i], rule.temperature, rule.seed,
                                                               rule.position,
                                                               static_cast<int32_t>(i));
    kernels::ChoiceScratch s;
    const int32_t want = kernels::choose_token(row, rule, s);
    for (int64_t chunk : {int64_t{1}, int64_t{7}, int64_t{256}, V})
      EXPECT_EQ(tree_argmax(score, chunk, rng), want) << "trial " << trial << " chunk " << chunk;
  }
}

}  // namespace
}  // namespace lockstep
