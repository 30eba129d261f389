// The Gated DeltaNet token mixer of Qwen3.5 / Qwen3-Next linear-attention layers: projections,
// causal conv (kernel K) with SiLU, l2-normalised q and k, the per-token gated delta rule on an
// F32 state [value heads][dk][dv], gated RMSNorm with silu(z), out_proj.
//
// A token's state update is split into the part that needs the whole row of hidden size (the
// projections, done for all rows of a call at once) and the per-token recurrent step
// (deltanet_token_*), which is what forward, decode, verify and rollback replay all call.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "kernels/ops.h"
#include "models/config.h"

namespace lockstep {

struct DeltaNetDims {
  int64_t nk = 0, nv = 0, dk = 0, dv = 0, K = 0;  // key heads, value heads, head dims, conv taps
  int64_t key_dim() const { return nk * dk; }
  int64_t value_dim() const { return nv * dv; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // conv channels: q | k | v
  // Per-token inputs of the recurrent step: pre-conv q|k|v, then a and b per value head.
  int64_t token_inputs() const { return conv_dim() + 2 * nv; }
  int64_t conv_state_floats() const { return conv_dim() * (K - 1); }
  int64_t delta_state_floats() const { return nv * dk * dv; }
  static DeltaNetDims from(const ModelConfig& c);
};

struct DeltaNetWeights {
  bool fused = false;                  // qwen3_next: in_proj_qkvz / in_proj_ba
  kernels::Weight qkv, z, b, a;        // qwen3_5: separate projections
  kernels::Weight qkvz, ba;            // qwen3_next: grouped per key head
  std::vector<float> conv;             // [conv_dim][K]
  std::vector<float> A_log, dt_bias;   // [nv]
  std::vector<float> norm;             // [dv], plain RMSNorm weight
  kernels::Weight out;                 // [hidden][value_dim]
};

DeltaNetWeights load_deltanet(const Checkpoint& ckpt, const ModelConfig& c,
                              const std::string& prefix);

// One sequence's state in one linear layer.
struct DeltaNetState {
  std::vector<float> conv;   // [conv_dim][K-1], oldest input first
  std::vector<float> delta;  // [nv][dk][dv]
  static DeltaNetState zeros(const DeltaNetDims& d);
};

// Row-wise projections of T normed rows into per-token inputs [T][token_inputs()] (pre-conv
// q|k|v, a, b) and z [T][value_dim]. Fused (qwen3_next) rows are regrouped to the same layout.
void deltanet_project(const DeltaNetWeights& w, const DeltaNetDims& d, const float* h, int64_t T,
                      float* inputs, float* z, ThreadPool& threads);

// The per-token recurrent step, in two parts so that heads can run on different threads:
// (1) conv + SiLU, l2-normalise q and k, scale q, gates: `inputs` (token_inputs floats) ->
//     `prepared` [conv_dim + 2 nv] = q (scaled) | k | v | g | beta; advances the conv state.
void deltanet_token_prepare(const DeltaNetWeights& w, const DeltaNetDims& d, float* conv_state,
                            const float* inputs, float* prepared);
// (2) value head h's delta-rule step; out (dv floats) may be null.
void deltanet_token_head(const DeltaNetDims& d, float* delta_state, const float* prepared,
                         int64_t h, float* out);

// One sequence's slice of a forward call: `n` consecutive rows starting at `first`.
struct DeltaNetSpan {
  DeltaNetState* state;
  int64_t first, n;
};
// out[T][hidden] = the token mixer over rows whose inputs/z come from deltanet_project. Each
// span's tokens run in order through its state; threads split (span, value head) pairs.
void deltanet_mix(const DeltaNetWeights& w, const DeltaNetDims& d, const float* inputs,
                  const float* z, int64_t T, std::span<const DeltaNetSpan> spans, float eps,
                  float* out, ThreadPool& threads);

// Replays tokens (their saved inputs [n][token_inputs()]) into a state, without outputs.
void deltanet_replay(const DeltaNetWeights& w, const DeltaNetDims& d, DeltaNetState& s,
                     const float* inputs, int64_t n);

}  // namespace lockstep
