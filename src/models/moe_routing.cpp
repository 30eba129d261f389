#include "models/moe_routing.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "kernels/ops.h"

namespace lockstep {

Routing route_tokens(std::span<const float> logits, int64_t tokens, int64_t n_experts, int64_t k,
                     bool normalize) {
  if (k < 1 || k > n_experts) fail("route_tokens: k = ", k, " outside [1, ", n_experts, "]");
  if (static_cast<int64_t>(logits.size()) != tokens * n_experts)
    fail("route_tokens: ", logits.size(), " logits for ", tokens, " tokens of ", n_experts,
         " experts");
  Routing r;
  r.tokens = tokens;
  r.k = k;
  r.experts.resize(tokens * k);
  r.weights.resize(tokens * k);
  std::vector<float> p(n_experts);
  std::vector<int32_t> ids(n_experts);
  for (int64_t t = 0; t < tokens; ++t) {
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
  return r;
}

}  // namespace lockstep
