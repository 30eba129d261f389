#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/error.h"
#include "kernels/math.h"
#include "kernels/schedule.h"

namespace lockstep {

void SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || temperature > 100.0f)
    fail("temperature must be in [0, 100], got ", temperature);
  if (top_k < 0) fail("top_k must be >= 0, got ", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top_p must be in (0, 1], got ", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("min_p must be in [0, 1], got ", min_p);
  if (!(repetition_penalty > 0.0f)) fail("repetition_penalty must be > 0, got ", repetition_penalty);
  if (!(std::fabs(presence_penalty) <= 2.0f))
    fail("presence_penalty must be in [-2, 2], got ", presence_penalty);
  if (!(std::fabs(frequency_penalty) <= 2.0f))
    fail("frequency_penalty must be in [-2, 2], got ", frequency_penalty);
}

namespace {
uint64_t mix64(uint64_t z) {  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

float position_uniform(uint64_t seed, int64_t position, int32_t id) {
  uint64_t h = mix64(seed ^ 0x9e3779b97f4a7c15ull);
  h = mix64(h ^ static_cast<uint64_t>(position) * 0xd1b54a32d192ed03ull);
  h = mix64(h ^ static_cast<uint64_t>(static_cast<uint32_t>(id)));
  // 24 random bits, centred in their interval: never 0 or 1.
  return (static_cast<float>(h >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

int32_t Sampler::choose(std::span<const float> logits, const TokenHistory& history,
                        int64_t position) {
  const SamplingParams& p = params_;
  const int64_t V = static_cast<int64_t>(logits.size());
  work_.assign(logits.begin(), logits.end());
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
  auto better = [&](int32_t a, int32_t b) {  // higher value first, lower id on ties
    return work_[a] > work_[b] || (work_[a] == work_[b] && a < b);
  };
  if (p.greedy()) {
    int32_t best = 0;
    for (int32_t i = 1; i < V; ++i)
      if (work_[i] > work_[best]) best = i;
    return best;
  }
  for (auto& w : work_) w /= p.temperature;
  // Candidates: all ids, or the top-k, in descending order when a filter needs the order.
  ids_.resize(V);
  for (int32_t i = 0; i < V; ++i) ids_[i] = i;
  const bool need_sorted = p.top_k > 0 || p.top_p < 1.0f || p.min_p > 0.0f;
  if (need_sorted) {
    const int64_t k = p.top_k > 0 ? std::min<int64_t>(p.top_k, V) : V;
    std::partial_sort(ids_.begin(), ids_.begin() + k, ids_.end(), better);
    ids_.resize(k);
    if (p.top_p < 1.0f || p.min_p > 0.0f) {
      // Probabilities over the candidates in descending order (a fixed order: the sort's).
      const float mx = work_[ids_[0]];
      std::vector<float> e(ids_.size());
      float lanes[kernels::kLanes] = {};
      for (size_t i = 0; i < ids_.size(); ++i) {
        e[i] = kernels::exp_f32(work_[ids_[i]] - mx);
        lanes[i % kernels::kLanes] += e[i];
      }
      const float total = kernels::fold_lanes(lanes);
      size_t keep = ids_.size();
      if (p.min_p > 0.0f) {  // e[0] / total is the top probability
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

}  // namespace lockstep
