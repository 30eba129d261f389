// The feed-forward block of a decoder layer: a dense SwiGLU MLP, or a routed mixture of experts
// (Qwen3-MoE, Qwen3.5-MoE, Qwen3-Next) with an optional shared expert. Exactness
// (../shared/DESIGN.md, "Mixture of experts"; docs/design-notes.md): routing per token
// (moe_routing.h); each expert's projections are the invariant linear over the rows routed to
// it, so a token's expert output has the same bits whatever else shares the expert in the call;
// a token's k outputs and the shared expert are combined in one fixed order
// (Backend::moe_combine). No capacity limit, no dropped tokens, no padding.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "kernels/backend.h"
#include "models/attention_layer.h"
#include "models/config.h"
#include "models/moe_routing.h"

namespace lockstep {

struct ExpertWeights {
  kernels::Weight gate, up, down;  // [I][H], [I][H], [H][I]
};

// The experts under `prefix` ("model.layers.3.mlp." / Gemma 4's "model.layers.3."), from any of
// the published layouts below; c.num_experts of them, each [moe_intermediate_size][hidden].
std::vector<ExpertWeights> load_experts(const Checkpoint& ckpt, const ModelConfig& c,
                                        const std::string& prefix, kernels::Backend& be);

// out[T][hidden] = for each token, its k routed experts (routing r) applied to h[T][hidden] and
// combined by Backend::moe_combine (rank order; + sigmoid(shared_gate) * shared when shared is
// not null). The activation is silu, or gelu_tanh when `gelu_tanh`. Tokens are grouped by
// expert, each expert's projections the invariant linear over its rows.
void routed_experts_forward(std::span<const ExpertWeights> experts, bool gelu_tanh,
                            const float* h, int64_t T, const Routing& r, const float* shared,
                            const float* shared_gate, float* out, kernels::Backend& be);

struct MoeWeights {
  kernels::Weight router;  // [E][H]
  std::vector<ExpertWeights> experts;
  int64_t top_k = 0;
  bool normalize = false;     // renormalise the k routing weights
  bool has_shared = false;    // a shared expert beside the routed ones
  MlpWeights shared;          // its SwiGLU MLP
  kernels::Weight shared_gate;  // [1][H]: the shared expert's output is scaled by sigmoid of it
};

struct FeedForward {
  MlpWeights dense;
  std::unique_ptr<MoeWeights> moe;  // set: the layer routes to experts (dense is then unused)
};

// The block under `prefix` ("model.layers.3.mlp."): MoE when `moe`, else the dense MLP. Experts
// load from any published layout: one tensor per expert (experts.{e}.gate_proj.weight ...),
// transformers 5's fused experts.gate_up_proj [E][2I][H] / experts.down_proj [E][H][I], or MLX's
// switch_mlp.{gate,up,down}_proj (4/8-bit group-wise affine, 3-D); shards may split them.
FeedForward load_feed_forward(const Checkpoint& ckpt, const ModelConfig& c,
                              const std::string& prefix, bool moe, kernels::Backend& be);

// out[T][hidden] = the block applied to normed input h[T][hidden] (backend memory). An MoE block
// reads the router logits back to the host to route (the call then cannot be a recorded step).
void feed_forward(const FeedForward& ffn, const float* h, int64_t T, float* out,
                  kernels::Backend& be);

}  // namespace lockstep
