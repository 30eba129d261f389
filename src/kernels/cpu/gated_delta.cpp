// Gated DeltaNet per-token kernels (see kernels/gated_delta.h). Plain C++ with explicit std::fma:
// the build forbids contraction, so every rounding is the one written here on every target.
#include "kernels/gated_delta.h"

#include <cmath>
#include <vector>

#include "kernels/math.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/schedule.h"

namespace lockstep::kernels {

void causal_conv1d_step(const float* x, int64_t C, int64_t K, const float* w, float* state,
                        float* out) {
  const int64_t S = K - 1;
  for (int64_t c = 0; c < C; ++c) {
    const float* wc = w + c * K;
    float* sc = state + c * S;
    float acc = 0.0f;
    for (int64_t j = 0; j < S; ++j) acc = std::fma(wc[j], sc[j], acc);
    acc = std::fma(wc[S], x[c], acc);
    out[c] = silu_f32(acc);
    for (int64_t j = 0; j + 1 < S; ++j) sc[j] = sc[j + 1];
    if (S > 0) sc[S - 1] = x[c];
  }
}

void l2_normalize(float* x, int64_t rows, int64_t D, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * D;
    const float inv = 1.0f / std::sqrt(ref::dot(xr, xr, D) + eps);
    for (int64_t d = 0; d < D; ++d) xr[d] *= inv;
  }
}

namespace {

// out[v] = sum_k S[k][v] * a[k] for all v, each element reduced with the 16-lane schedule.
// lanes[l][v] holds lane l of element v; rows k are visited in increasing order, so for every v
// this is exactly scheduled_dot(dk, S[.][v], a), padding terms fma(0, 0, acc) = acc + 0 included
// (they only matter for the sign of a zero lane, but bit-for-bit means bit-for-bit).
void column_dots(const float* S, int64_t dk, int64_t dv, const float* a, float* lanes, float* out) {
  for (int64_t i = 0; i < kLanes * dv; ++i) lanes[i] = 0.0f;
  for (int64_t k = 0; k < dk; ++k) {
    float* lane = lanes + (k % kLanes) * dv;
    const float* row = S + k * dv;
    const float ak = a[k];
    for (int64_t v = 0; v < dv; ++v) lane[v] = std::fma(row[v], ak, lane[v]);
  }
  for (int64_t k = dk; k % kLanes != 0; ++k) {
    float* lane = lanes + (k % kLanes) * dv;
    for (int64_t v = 0; v < dv; ++v) lane[v] = lane[v] + 0.0f;
  }
  float tmp[kLanes];
  for (int64_t v = 0; v < dv; ++v) {
    for (int l = 0; l < kLanes; ++l) tmp[l] = lanes[l * dv + v];
    out[v] = fold_lanes(tmp);
  }
}

}  // namespace

void gated_delta_step(float* state, int64_t dk, int64_t dv, const float* q, const float* k,
                      const float* v, float g, float beta, float* out) {
  thread_local std::vector<float> lanes, kv_mem;
  lanes.resize(kLanes * dv);
  kv_mem.resize(dv);
  const float decay = exp_f32(g);
  for (int64_t i = 0; i < dk * dv; ++i) state[i] *= decay;
  column_dots(state, dk, dv, k, lanes.data(), kv_mem.data());
  float* delta = kv_mem.data();  // reused in place: delta[v] depends only on kv_mem[v]
  for (int64_t j = 0; j < dv; ++j) delta[j] = (v[j] - kv_mem[j]) * beta;
  for (int64_t i = 0; i < dk; ++i) {
    float* row = state + i * dv;
    const float ki = k[i];
    for (int64_t j = 0; j < dv; ++j) row[j] = row[j] + ki * delta[j];
  }
  if (out) column_dots(state, dk, dv, q, lanes.data(), out);
}

void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t D, const float* w,
                    float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * D;
    const float* zr = z + r * D;
    float* yr = y + r * D;
    const float inv = 1.0f / std::sqrt(ref::dot(xr, xr, D) / static_cast<float>(D) + eps);
    for (int64_t d = 0; d < D; ++d) yr[d] = ((xr[d] * inv) * w[d]) * silu_f32(zr[d]);
  }
}

void delta_gates(const float* a, const float* b, const float* A_log, const float* dt_bias,
                 int64_t n, float* g, float* beta) {
  for (int64_t h = 0; h < n; ++h) {
    g[h] = -exp_f32(A_log[h]) * softplus_f32(a[h] + dt_bias[h]);
    beta[h] = sigmoid_f32(b[h]);
  }
}

}  // namespace lockstep::kernels
