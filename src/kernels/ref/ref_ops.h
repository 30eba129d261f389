// Scalar oracles: the plainest statement of each kernel's schedule (schedule.h), written with
// std::fma. The SIMD kernels must match them bit for bit on every target; tests force each
// compiled Highway target and compare.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/math.h"
#include "kernels/schedule.h"

#include "core/dtype.h"

namespace lockstep::kernels::ref {

// Weight element (n, k) of a [N][K] matrix as float32.
float weight_at(DType dtype, const void* w, int64_t K, int64_t n, int64_t k);

// y[m][n] for n in [n0, n1), all m < M; y has row stride N.
void linear_cols(const float* x, int64_t M, DType dtype, const void* w, int64_t K, int64_t n0,
                 int64_t n1, float* y, int64_t N);

// The same products summed in a different order (8 lanes, lane = k mod 8): what a kernel tuned
// per shape would do. Used only by `fast` numerics, to measure what breaking the rule costs.
void linear_cols_other_order(const float* x, int64_t M, DType dtype, const void* w, int64_t K,
                             int64_t n0, int64_t n1, float* y, int64_t N);

// Scheduled dot product of two float32 vectors.
float dot(const float* a, const float* b, int64_t K);

// Attention of one query vector (one row, one head) over its keys: scores by the dot schedule
// times `scale`, their max, exp_f32(score - max), the denominator summed in the 16-lane schedule
// over positions (lane = position mod 16), weights score * (1 / denominator), values accumulated
// with std::fma in position order. key(p) / value(p) return the p-th key's vector of head_dim:
// position p for full attention, first_key + p for a sliding-window row (lanes then count from
// the window's first key).
// `scores` is scratch of at least n_keys floats.
template <typename KeyFn, typename ValueFn>
void attend_one(const float* q, int64_t head_dim, int64_t n_keys, float scale, KeyFn key,
                ValueFn value, float* scores, float* out);

template <typename KeyFn, typename ValueFn>
void attend_one(const float* q, int64_t head_dim, int64_t n_keys, float scale, KeyFn key,
                ValueFn value, float* scores, float* out) {
  float mx = -INFINITY;
  for (int64_t p = 0; p < n_keys; ++p) {
    scores[p] = dot(q, key(p), head_dim) * scale;
    mx = std::fmax(mx, scores[p]);
  }
  float lanes[kLanes] = {};
  for (int64_t p = 0; p < n_keys; ++p) {
    scores[p] = exp_f32(scores[p] - mx);
    lanes[p % kLanes] += scores[p];
  }
  const float inv = 1.0f / fold_lanes(lanes);
  for (int64_t d = 0; d < head_dim; ++d) out[d] = 0.0f;
  for (int64_t p = 0; p < n_keys; ++p) {
    const float w = scores[p] * inv;
    const float* v = value(p);
    for (int64_t d = 0; d < head_dim; ++d) out[d] = std::fma(w, v[d], out[d]);
  }
}

}  // namespace lockstep::kernels::ref
