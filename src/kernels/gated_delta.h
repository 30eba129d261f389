// Kernels of the Gated DeltaNet token mixer (Qwen3.5 / Qwen3-Next linear-attention layers).
//
// Every function here processes ONE token of ONE sequence: the recurrent state after token t is
// the same per-token step whether t came in a prompt chunk, a decode step or a verify block
// (../shared/DESIGN.md, "Recurrent layers"). There is deliberately no chunked form. Reductions
// over the key dimension use the 16-lane schedule (schedule.h); nothing depends on how many
// tokens, sequences or threads a call has.
#pragma once

#include <cstdint>

namespace lockstep::kernels {

// Causal depthwise conv1d over the channel vector of one token, followed by SiLU.
// state: [C][K-1], the previous K-1 inputs of each channel, oldest first (zeros at sequence start).
// w: [C][K] (the checkpoint's conv1d.weight [C][1][K]); tap K-1 multiplies the current input.
// out[c] = silu(sum_j w[c][j] * window[c][j]) with window = [state[c] | x[c]], summed in j order
// with FMAs; then state[c] shifts left by one and takes x[c]. out may not alias x or state.
void causal_conv1d_step(const float* x, int64_t C, int64_t K, const float* w, float* state,
                        float* out);

// In place: x *= 1 / sqrt(sum(x^2) + eps) over each of `rows` vectors of length D (the FLA /
// transformers l2norm; eps 1e-6 there). The sum uses the 16-lane schedule.
void l2_normalize(float* x, int64_t rows, int64_t D, float eps);

// One delta-rule step of one value head. state: [dk][dv] float32, updated in place.
//   state *= exp(g)
//   kv_mem[v] = sum_k state[k][v] * k[k]
//   delta[v]  = (v[v] - kv_mem[v]) * beta
//   state[k][v] += k[k] * delta[v]
//   out[v] = sum_k state[k][v] * q[k]          (out may be null when only the state is wanted)
// q is expected l2-normalised and already scaled by dk^-1/2, k l2-normalised. Both sums over k use
// the 16-lane schedule (lane = k mod 16, FMAs in increasing k, fixed folding tree) per v.
void gated_delta_step(float* state, int64_t dk, int64_t dv, const float* q, const float* k,
                      const float* v, float g, float beta, float* out);

// Gated RMSNorm of `rows` vectors of D (one value head each): y = (x / rms(x)) * w * silu(z).
// A plain (not zero-centred) weight, as in Qwen3.5's / Qwen3-Next's RMSNormGated. y may equal x.
void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t D, const float* w,
                    float eps, float* y);

// Per value head: g = -exp(A_log) * softplus(a + dt_bias) (the log-space decay) and
// beta = sigmoid(b), for n heads.
void delta_gates(const float* a, const float* b, const float* A_log, const float* dt_bias,
                 int64_t n, float* g, float* beta);

}  // namespace lockstep::kernels
