// The feed-forward block of a decoder layer: a dense SwiGLU MLP, or a routed mixture of experts
// (Qwen3-MoE, Qwen3.5-MoE, Qwen3-Next) with an optional shared expert. Exactness
// (../shared/DESIGN.md, "Mixture of experts"; docs/design-notes.md): routing per token
// (moe_routing.h); each expert's projections are the invariant linear over the rows routed to
// it, so a token's expert output has the same bits whatever else shares the expert in the call;
// a token's k outputs and the shared expert are combined in one fixed order
// (Backend::moe_combine). No capacity limit, no dropped tokens, no padding.
#pragma once

#include <algorithm>
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

// A layer's expert weights as the device path reads them (Backend::moe_on_device): pointers into
// the ExpertWeights, gate and up of expert e at gate_up[2 e], [2 e + 1], its down at down[e].
// With holds_shared, one more expert at index E: the layer's shared expert, which then runs in
// the routed experts' grouped launches (its group over every token; moe_group's `shared`)
// instead of three launches of its own.
struct ExpertSet {
  std::vector<const kernels::Weight*> gate_up, down;
  bool on_device = false;     // the backend routes, groups and runs these experts on the device
  bool holds_shared = false;  // the last expert is the shared one
};
// The set over `experts` (which must outlive it and not move), holding `shared` too where given
// and it can: a SwiGLU of the routed experts' shape and format without biases, on a backend that
// runs the experts (its bits are the same either way: the grouped launch is linear() row for
// row).
ExpertSet expert_set(std::span<const ExpertWeights> experts, const kernels::Backend& be,
                     const MlpWeights* shared = nullptr);
// True when a call of T tokens runs set's shared expert in the grouped launches: set.holds_shared
// and the call takes them (it routes on the device, or its host routing is uploaded: BF16).
bool shared_in_groups(const ExpertSet& set, int64_t T);
// True when a call of T tokens through these experts routes on the device (else on the host).
inline bool routes_on_device(const ExpertSet& set, int64_t T) {
  return set.on_device && T <= kernels::kMoeDeviceMaxTokens;
}
// The most tokens a recorded step through these experts may hold (it must read nothing back):
// min(limit, kMoeDeviceMaxTokens) on the device, 0 when they route on the host.
inline int64_t experts_record_limit(const ExpertSet& set, int64_t limit) {
  return set.on_device ? std::min(limit, kernels::kMoeDeviceMaxTokens) : 0;
}

// A call's routing and grouping in backend memory (Backend::moe_route_group): experts / weights
// [T][k], source / slot [T k] and the groups table, for T <= kernels::kMoeDeviceMaxTokens tokens.
struct DeviceRouting {
  kernels::Ints experts;
  kernels::Floats weights;
  kernels::Ints source, slot, groups;
  int64_t T = 0, k = 0;
  // The most rows one expert has (sizes the grouped launches): T when routed on the device, whose
  // counts the host never sees; the real maximum when uploaded from a host routing.
  int64_t max_rows = 0;
  // The groups end with the shared expert's (grouped rows T k + t are token t's).
  bool shared = false;
};
// Routes router logits [T][E] (route_tokens' bits; expert_scale as Backend::moe_route) and groups
// the assignments, on the device (one launch where it fits); `shared`: the groups end with the
// shared expert's (expert E, every token).
DeviceRouting route_on_device(const float* logits, int64_t T, int64_t E, int64_t k,
                              bool normalize, const float* expert_scale, kernels::Backend& be,
                              bool shared = false);

// route_tokens' routing (expert_scale as Backend::moe_route) computed by the backend's moe_route
// and read back, for calls past kernels::kMoeDeviceMaxTokens on a backend that runs the experts:
// routing a 2048-token prefill chunk on the host took ~11 ms a layer (128 experts), with the GPU
// idle. Needs set.on_device.
Routing route_on_backend(const float* logits, int64_t T, int64_t E, int64_t k, bool normalize,
                         const float* expert_scale, kernels::Backend& be);

// The routing of a call that does not route on the device (past kernels::kMoeDeviceMaxTokens, or
// on a backend that does not run the experts), as host data: route_on_backend where the backend
// runs the experts, else route_tokens over the downloaded logits on the backend's pool.
// expert_scale (Gemma 4; empty: none) multiplies each weight by its expert's factor after the
// renormalisation, as Backend::moe_route does; expert_scale_dev is the same in backend memory
// (read when set.on_device). The bits are route_tokens' either way.
Routing route_to_host(const ExpertSet& set, const float* logits, int64_t T, int64_t E, int64_t k,
                      bool normalize, std::span<const float> expert_scale,
                      const float* expert_scale_dev, kernels::Backend& be);

// A host routing (route_tokens, after any scaling of its weights) grouped by group_by_expert and
// uploaded in moe_route_group's layout, for calls past kernels::kMoeDeviceMaxTokens (a prefill
// chunk) on a backend that runs the experts (set.on_device): the experts then take one grouped
// launch per projection instead of one launch per active expert and projection (up to 3 E).
DeviceRouting upload_routing(const Routing& r, int64_t E, kernels::Backend& be,
                             bool shared = false);

// A host-routed call through the experts: routed_experts_forward_device on upload_routing's tables
// when set.on_device and the experts are BF16, else routed_experts_forward. The bits are the same
// either way. When shared_in_groups(set, T), the shared expert runs in the grouped launches and
// `shared` must be null (shared_gate still scales it); otherwise `shared` is its output.
void routed_experts_forward_host_routed(const ExpertSet& set,
                                        std::span<const ExpertWeights> experts, bool gelu_tanh,
                                        const float* h, int64_t T, const Routing& r,
                                        const float* shared, const float* shared_gate, float* out,
                                        kernels::Backend& be);

// routed_experts_forward with the routing and grouping in backend memory: no host read, the same
// ops for any routing, so the call can be recorded. Needs set.on_device. Bitwise
// routed_experts_forward of the same routing. With r.shared (set.holds_shared), the shared
// expert's output is the grouped launches' rows past the routed ones and `shared` must be null.
void routed_experts_forward_device(const ExpertSet& set, bool gelu_tanh, const float* h,
                                   const DeviceRouting& r, const float* shared,
                                   const float* shared_gate, float* out, kernels::Backend& be);

struct MoeWeights {
  kernels::Weight router;  // [E][H]
  std::vector<ExpertWeights> experts;
  int64_t top_k = 0;
  bool normalize = false;     // renormalise the k routing weights
  bool has_shared = false;    // a shared expert beside the routed ones
  MlpWeights shared;          // its SwiGLU MLP
  kernels::Weight shared_gate;  // [1][H]: the shared expert's output is scaled by sigmoid of it
  ExpertSet set;                // over `experts`, and `shared` where it can hold it
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
// routes on the device when the backend can (ExpertSet::on_device) and T <=
// kernels::kMoeDeviceMaxTokens; otherwise it reads the router logits back to the host to route
// (the call then cannot be a recorded step) and, on such a backend, still runs the experts as
// grouped launches. The bits are the same either way.
void feed_forward(const FeedForward& ffn, const float* h, int64_t T, float* out,
                  kernels::Backend& be);

// The most tokens a step through this feed-forward may hold and still be recorded, i.e. read
// nothing back to the host: `dense_limit` for a dense MLP, kernels::kMoeDeviceMaxTokens for experts
// on the device (more tokens route on the host), 0 for experts routed on the host.
int64_t feed_forward_record_limit(const FeedForward& ffn, int64_t dense_limit);
// The same over a model's layers (each with its feed-forward `mlp`): the most tokens a recorded
// step may hold, 0 when none may be recorded.
template <typename Layers>
int64_t layers_record_limit(const Layers& layers, int64_t dense_limit) {
  for (const auto& L : layers) dense_limit = feed_forward_record_limit(L.mlp, dense_limit);
  return dense_limit;
}

}  // namespace lockstep
