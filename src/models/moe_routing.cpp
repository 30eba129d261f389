#include "models/moe_routing.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "kernels/ops.h"

namespace lockstep {

Routing route_tokens(std::span<const float> logits, int64_t tokens, int64_t n_experts, int64_t k,
                     bool normalize, ThreadPool* pool) {
  if (k < 1 || k > n_experts) fail("route_tokens: k = ", k, " outside [1, ", n_experts, "]");
  if (static_cast<int64_t>(logits.size()) != tokens * n_experts)
    fail("route_tokens: ", logits.size(), " logits for ", tokens, " tokens of ", n_experts,
         " experts");
  Routing r;
  r.tokens = tokens;
  r.k = k;
  r.experts.resize(tokens * k);
  r.weights.resize(tokens * k);
  // Tokens [t0, t1): each one's routing from its own logits row alone.
  auto route = [&](int64_t t0, int64_t t1) {
    std::vector<float> p(n_experts);
    std::vector<int32_t> ids(n_experts);
    for (int64_t t = t0; t < t1; ++t) {
      std::copy_n(logits.begin() + t * n_experts, n_experts, p.begin());
      kernels::softmax(p.data(), n_experts);
      for (float& x : p)  // a NaN (broken weights) ranks last, keeping the order strict
        if (x != x) x = -1.0f;
      std::iota(ids.begin(), ids.end(), 0);
      // A strict total order, so the selection (and its rank order) is unique.
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        return p[a] > p[b] || (p[a] == p[b] && a < b);
      });
      float sum = 0.0f;
      for (int64_t j = 0; j < k; ++j) sum += p[ids[j]];
      for (int64_t j = 0; j < k; ++j) {
        r.experts[t * k + j] = ids[j];
        r.weights[t * k + j] = normalize ? p[ids[j]] / sum : p[ids[j]];
      }
    }
  };
  // A prefill chunk's tokens over the pool (~5 us a token with 128 experts on one core: 11 ms a
  // layer at 2048 tokens); a step's few tokens stay on the caller's thread.
  constexpr int64_t kTokensPerTask = 32;
  if (pool && tokens >= 2 * kTokensPerTask) pool->parallel_for(tokens, route, kTokensPerTask);
  else route(0, tokens);
  return r;
}

ExpertGroups group_by_expert(const Routing& r, int64_t E) {
  ExpertGroups g;
  const int64_t n = r.tokens * r.k;
  g.count.assign(E, 0);
  for (int32_t e : r.experts) ++g.count[e];
  g.first.assign(E, 0);
  for (int64_t e = 1; e < E; ++e) g.first[e] = g.first[e - 1] + g.count[e - 1];
  std::vector<int64_t> next = g.first;
  g.source.resize(n);
  g.slot.resize(n);
  for (int64_t i = 0; i < n; ++i) {  // i = t * k + j, so tokens ascend within each expert
    const int64_t row = next[r.experts[i]]++;
    g.source[row] = static_cast<int32_t>(i / r.k);
    g.slot[i] = static_cast<int32_t>(row);
  }
  return g;
}

}  // namespace lockstep
