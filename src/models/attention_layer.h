// A (pre-norm) self-attention block shared by the model families: projections, optional q/k norm,
// RoPE, KV write, attention over the paged cache, optional sigmoid output gate, output projection.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "kernels/rope_table.h"
#include "models/config.h"
#include "models/kv_pool.h"

namespace lockstep {

// The rows of one forward call as attention sees them, in the backend's memory.
struct BatchRows {
  std::vector<int64_t> positions;  // host: absolute position of each row
  kernels::Ints slots;             // per row: its KV cache slot (KvPool::slot)
  kernels::Ints tables;            // [rows][table_stride]: each row's sequence block table
  kernels::Ints n_keys;            // per row: attend to positions [0, n_keys)
  kernels::Floats cos_sin;         // [rows][rotary_dim]
  kernels::AttentionBatch attn;    // views of tables / n_keys
};

struct AttentionWeights {
  kernels::Weight q, k, v, o;
  kernels::Floats q_bias, k_bias, v_bias, o_bias;  // empty when absent
  kernels::Floats q_norm, k_norm;                  // empty when the family has no q/k norm
  bool gated = false;  // q_proj yields [query | gate] per head; output *= sigmoid(gate)
};

// Loads self_attn.* under `prefix` (e.g. "model.layers.3.self_attn.") into the backend.
AttentionWeights load_attention(const Checkpoint& ckpt, const ModelConfig& c,
                                const std::string& prefix, kernels::Backend& be);

// What a family changes per layer (Gemma 3: sliding layers, their own RoPE table, the
// query_pre_attn_scalar scale). The defaults are the plain block.
struct AttentionOptions {
  const float* cos_sin = nullptr;  // [rows][rotary_dim] in the backend's memory; null: rows.cos_sin
  int64_t window = 0;              // > 0: sliding window (kernels::AttentionBatch::window)
  float scale = 0;                 // score scale; 0: head_dim^-0.5
};

// out[T][hidden] = attention block applied to normed input h[T][hidden]; writes this call's keys
// and values into layer `kv_layer` of the pool first. All arrays in the backend's memory.
void attention_forward(const AttentionWeights& w, const ModelConfig& c, const float* h, int64_t T,
                       const BatchRows& rows, KvPool& pool, int64_t kv_layer, float* out,
                       kernels::Backend& be, const AttentionOptions& options = {});

// An optional vector's data, or null when absent (a LinearOut's bias).
inline const float* data_or_null(const kernels::Floats& v) { return v.empty() ? nullptr : v.data(); }

struct MlpWeights {
  kernels::Weight gate, up, down;
  kernels::Floats gate_bias, up_bias, down_bias;
  bool gelu_tanh = false;  // gelu_pytorch_tanh (Gemma) instead of silu
};
// gate/up/down_proj under `prefix`, of `intermediate` rows (-1: c.intermediate_size; a shared
// expert passes its own size).
MlpWeights load_mlp(const Checkpoint& ckpt, const ModelConfig& c, const std::string& prefix,
                    kernels::Backend& be, int64_t intermediate = -1);
// out[T][hidden] = down(act(gate(h)) * up(h)); act is silu, or gelu_tanh when
// c.hidden_activation (at load) says gelu_pytorch_tanh.
void mlp_forward(const MlpWeights& w, const float* h, int64_t T, float* out, kernels::Backend& be);
// The rest of mlp_forward once gate g[T][I] and up u[T][I] are computed (a caller that runs them
// in a launch with other weights of the same x): g = act(g) * u, then out = down(g).
void mlp_down(const MlpWeights& w, float* g, const float* u, int64_t T, float* out,
              kernels::Backend& be);

}  // namespace lockstep
