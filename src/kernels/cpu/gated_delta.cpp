// Gated DeltaNet per-token kernels (see kernels/gated_delta.h). Plain C++ with explicit std::fma:
// the build forbids contraction, so every rounding is the one written here on every target.
#include "kernels/gated_delta.h"

#include <cmath>
#include <vector>

#include "core/profile.h"
#include "kernels/math.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/schedule.h"

// Without -mfma, std::fma is a libm call per element (exact, but ~20x slower). On x86-64 the hot
// loops are also compiled for x86-64-v3, where it is one vfmadd and the loops over v vectorise;
// an FMA is exactly rounded either way, so both clones give the same bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LOCKSTEP_FMA_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define LOCKSTEP_FMA_CLONES
#endif

namespace lockstep::kernels {

LOCKSTEP_FMA_CLONES
void causal_conv1d_step(const float* x, int64_t C, int64_t K, const float* w, float* state,
                        float* out) {
  profile::Scope prof(profile::Op::DeltaNetConv);
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

namespace {

// Folds lanes [kLanes][dv] into out[dv] after adding the padding terms of the 16-lane schedule
// (fma(0, 0, acc) = acc + 0 for k = dk .. next multiple of 16: only the sign of a zero lane can
// change, but bit-for-bit means bit-for-bit with scheduled_dot).
void fold_columns(float* lanes, int64_t dk, int64_t dv, float* out) {
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

// Two passes over the state. Pass 1 decays row k and adds it into the kv_mem lanes; pass 2 adds
// k[k] * delta to row k and adds the updated row into the output lanes. For each v the sums over
// k are exactly scheduled_dot(dk, state[.][v], k or q): lane l of element v is lanes[l][v], rows
// visited in increasing k. Fusing the elementwise updates into the reductions changes no rounding.
LOCKSTEP_FMA_CLONES
void gated_delta_step(float* state, int64_t dk, int64_t dv, const float* q, const float* k,
                      const float* v, float g, float beta, float* out) {
  thread_local std::vector<float> lanes, delta;
  lanes.assign(kLanes * dv, 0.0f);
  delta.resize(dv);
  const float decay = exp_f32(g);
  for (int64_t i = 0; i < dk; ++i) {
    float* row = state + i * dv;
    float* lane = lanes.data() + (i % kLanes) * dv;
    const float ki = k[i];
    for (int64_t j = 0; j < dv; ++j) {
      row[j] = row[j] * decay;
      lane[j] = std::fma(row[j], ki, lane[j]);
    }
  }
  fold_columns(lanes.data(), dk, dv, delta.data());  // kv_mem
  for (int64_t j = 0; j < dv; ++j) delta[j] = (v[j] - delta[j]) * beta;
  lanes.assign(kLanes * dv, 0.0f);
  for (int64_t i = 0; i < dk; ++i) {
    float* row = state + i * dv;
    float* lane = lanes.data() + (i % kLanes) * dv;
    const float ki = k[i], qi = q[i];
    for (int64_t j = 0; j < dv; ++j) {
      row[j] = row[j] + ki * delta[j];
      lane[j] = std::fma(row[j], qi, lane[j]);
    }
  }
  if (out) fold_columns(lanes.data(), dk, dv, out);
}

void delta_gates(const float* a, const float* b, const float* A_log, const float* dt_bias,
                 int64_t n, float* g, float* beta) {
  for (int64_t h = 0; h < n; ++h) {
    g[h] = -exp_f32(A_log[h]) * softplus_f32(a[h] + dt_bias[h]);
    beta[h] = sigmoid_f32(b[h]);
  }
}

}  // namespace lockstep::kernels
