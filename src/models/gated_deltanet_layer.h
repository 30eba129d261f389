// The Gated DeltaNet token mixer of Qwen3.5 / Qwen3-Next linear-attention layers: projections,
// causal conv (kernel K) with SiLU, l2-normalised q and k, the per-token gated delta rule on an
// F32 state [value heads][dk][dv], gated RMSNorm with silu(z), out_proj.
//
// A token's state update is split into the part that needs the whole row of hidden size (the
// projections, done for all rows of a call at once) and the per-token recurrent step
// (Backend::deltanet_step), which is what forward, decode, verify and rollback replay all call.
#pragma once

#include <span>
#include <string>

#include "io/safetensors.h"
#include "kernels/backend.h"
#include "models/config.h"

namespace lockstep {

using DeltaNetDims = kernels::DeltaNetShape;
DeltaNetDims deltanet_dims(const ModelConfig& c);  // checks the config's linear-attention fields

struct DeltaNetWeights {
  bool fused = false;                  // qwen3_next: in_proj_qkvz / in_proj_ba
  kernels::Weight qkv, z, b, a;        // qwen3_5: separate projections
  kernels::Weight qkvz, ba;            // qwen3_next: grouped per key head
  kernels::Floats conv;                // [conv_dim][K]
  kernels::Floats A_log, dt_bias;      // [nv]
  kernels::Floats norm;                // [dv], plain RMSNorm weight
  kernels::Weight out;                 // [hidden][value_dim]
};

DeltaNetWeights load_deltanet(const Checkpoint& ckpt, const ModelConfig& c,
                              const std::string& prefix, kernels::Backend& be);

// One sequence's state in one linear layer, in the backend's memory.
struct DeltaNetState {
  kernels::Floats conv;   // [conv_dim][K-1], oldest input first
  kernels::Floats delta;  // [nv][dk][dv]
  static DeltaNetState zeros(const DeltaNetDims& d, kernels::Backend& be);
  DeltaNetState copy(kernels::Backend& be) const;
  // This state's arrays take src's values (same sizes; no allocation: a recorded step may do it).
  void assign(const DeltaNetState& src, kernels::Backend& be);
};

// Row-wise projections of T normed rows into per-token inputs [T][token_inputs()] (pre-conv
// q|k|v, a, b) and z [T][value_dim]. Fused (qwen3_next) rows are regrouped to the same layout.
void deltanet_project(const DeltaNetWeights& w, const DeltaNetDims& d, const float* h, int64_t T,
                      float* inputs, float* z, kernels::Backend& be);

// out[T][hidden] = the token mixer over rows whose inputs/z come from deltanet_project. Each
// span's tokens run in order through its state; spans [n_spans] in the backend's memory.
void deltanet_mix(const DeltaNetWeights& w, const DeltaNetDims& d, const float* inputs,
                  const float* z, int64_t T, const kernels::DeltaNetSpan* spans, int64_t n_spans,
                  int64_t max_span_tokens, float eps, float* out, kernels::Backend& be);

// Replays tokens (their saved inputs [n][token_inputs()]) into a state, without outputs.
void deltanet_replay(const DeltaNetWeights& w, const DeltaNetDims& d, DeltaNetState& s,
                     const float* inputs, int64_t n, kernels::Backend& be);

}  // namespace lockstep
