#include "models/moe_layer.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "models/moe_routing.h"
#include "models/weights.h"

namespace lockstep {

namespace {

enum class ExpertLayout { PerExpert, Fused, SwitchMlp };

// Which published layout holds the experts under `p` ("...mlp."); an error naming what was looked
// for when none does.
ExpertLayout expert_layout(const Checkpoint& ckpt, const std::string& p) {
  if (ckpt.has(p + "experts.gate_up_proj")) return ExpertLayout::Fused;
  if (ckpt.has(p + "switch_mlp.gate_proj.weight")) return ExpertLayout::SwitchMlp;
  if (ckpt.has(p + "experts.0.gate_proj.weight")) return ExpertLayout::PerExpert;
  fail(ckpt.dir(), ": no experts under ", p, " (expected ", p, "experts.0.gate_proj.weight ... "
       "(one tensor per expert), ", p, "experts.gate_up_proj + ", p,
       "experts.down_proj (fused), or ", p, "switch_mlp.gate_proj.weight ... (MLX))");
}

ExpertWeights load_expert(const Checkpoint& ckpt, ExpertLayout layout, const std::string& p,
                          int64_t e, int64_t E, int64_t I, int64_t H) {
  ExpertWeights x;
  switch (layout) {
    case ExpertLayout::PerExpert: {
      const std::string q = p + "experts." + std::to_string(e) + ".";
      x.gate = matrix(ckpt, q + "gate_proj.weight", I, H);
      x.up = matrix(ckpt, q + "up_proj.weight", I, H);
      x.down = matrix(ckpt, q + "down_proj.weight", H, I);
      break;
    }
    case ExpertLayout::Fused:  // gate rows first, then up rows (transformers' chunk order)
      x.gate = stacked_matrix(ckpt, p + "experts.gate_up_proj", E, 2 * I, H, e, 0, I);
      x.up = stacked_matrix(ckpt, p + "experts.gate_up_proj", E, 2 * I, H, e, I, I);
      x.down = stacked_matrix(ckpt, p + "experts.down_proj", E, H, I, e, 0, H);
      break;
    case ExpertLayout::SwitchMlp:
      x.gate = stacked_matrix(ckpt, p + "switch_mlp.gate_proj.weight", E, I, H, e, 0, I);
      x.up = stacked_matrix(ckpt, p + "switch_mlp.up_proj.weight", E, I, H, e, 0, I);
      x.down = stacked_matrix(ckpt, p + "switch_mlp.down_proj.weight", E, H, I, e, 0, H);
      break;
  }
  return x;
}

std::unique_ptr<MoeWeights> load_moe(const Checkpoint& ckpt, const ModelConfig& c,
                                     const std::string& p, kernels::Backend& be) {
  const int64_t H = c.hidden_size, E = c.num_experts;
  auto m = std::make_unique<MoeWeights>();
  m->top_k = c.num_experts_per_tok;
  m->normalize = c.norm_topk_prob;
  m->router = be.place(matrix(ckpt, p + "gate.weight", E, H));
  m->experts = load_experts(ckpt, c, p, be);
  if (c.shared_expert_intermediate_size > 0) {
    m->has_shared = true;
    m->shared = load_mlp(ckpt, c, p + "shared_expert.", be, c.shared_expert_intermediate_size);
    m->shared_gate = be.place(matrix(ckpt, p + "shared_expert_gate.weight", 1, H));
  }
  m->set = expert_set(m->experts, be, m->has_shared ? &m->shared : nullptr);
  return m;
}

void moe_forward(const MoeWeights& m, const float* h, int64_t T, float* out,
                 kernels::Backend& be) {
  const int64_t E = static_cast<int64_t>(m.experts.size()), H = m.router.cols;
  kernels::Floats logits = be.array<float>(T * E);
  // The shared expert and its gate (Qwen3.5, Qwen3-Next) do not depend on the routing. Where the
  // grouped launches hold the shared expert, the router and the shared expert's gate are one
  // linear_multi and the expert runs with the routed ones; otherwise its gate and up projections
  // join that linear_multi too (each output bitwise its own linear; on the GPU one launch).
  const bool grouped = shared_in_groups(m.set, T);  // implies m.has_shared
  kernels::Floats shared, shared_gate;  // empty (null data) without one
  if (m.has_shared) {
    shared_gate = be.array<float>(T);
    const kernels::LinearOut router_and_gate[] = {{&m.router, nullptr, logits.data()},
                                                  {&m.shared_gate, nullptr, shared_gate.data()}};
    if (grouped) {
      be.linear_multi(h, T, router_and_gate);
    } else {
      const int64_t I = m.shared.gate.rows;
      shared = be.array<float>(T * H);
      kernels::Floats g = be.array<float>(T * I), u = be.array<float>(T * I);
      const kernels::LinearOut outs[] = {
          router_and_gate[0], router_and_gate[1],
          {&m.shared.gate, data_or_null(m.shared.gate_bias), g.data()},
          {&m.shared.up, data_or_null(m.shared.up_bias), u.data()}};
      be.linear_multi(h, T, outs);
      mlp_down(m.shared, g.data(), u.data(), T, shared.data(), be);
    }
  } else {
    be.linear(h, T, m.router, nullptr, logits.data());
  }
  const float* const s = shared.data();
  const float* const sg = shared_gate.data();
  if (routes_on_device(m.set, T)) {
    const DeviceRouting r =
        route_on_device(logits.data(), T, E, m.top_k, m.normalize, nullptr, be, grouped);
    routed_experts_forward_device(m.set, false, h, r, s, sg, out, be);
    return;
  }
  const Routing r = route_to_host(m.set, logits.data(), T, E, m.top_k, m.normalize, {}, nullptr, be);
  routed_experts_forward_host_routed(m.set, m.experts, false, h, T, r, s, sg, out, be);
}

}  // namespace

std::vector<ExpertWeights> load_experts(const Checkpoint& ckpt, const ModelConfig& c,
                                        const std::string& p, kernels::Backend& be) {
  const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  const ExpertLayout layout = expert_layout(ckpt, p);
  // One tensor per expert: a checkpoint with more experts than the config is another model.
  if (layout == ExpertLayout::PerExpert && ckpt.has(p + "experts." + std::to_string(E) +
                                                    ".gate_proj.weight"))
    fail(ckpt.dir(), ": tensor ", p, "experts.", E, ".gate_proj.weight exists, but the config "
         "says num_experts = ", E);
  std::vector<ExpertWeights> experts;
  for (int64_t e = 0; e < E; ++e) {
    ExpertWeights x = load_expert(ckpt, layout, p, e, E, I, H);
    experts.push_back({be.place(x.gate), be.place(x.up), be.place(x.down)});
  }
  return experts;
}

void routed_experts_forward(std::span<const ExpertWeights> experts, bool gelu_tanh,
                            const float* h, int64_t T, const Routing& r, const float* shared,
                            const float* shared_gate, float* out, kernels::Backend& be) {
  const int64_t E = static_cast<int64_t>(experts.size()), k = r.k;
  const int64_t H = experts.front().gate.cols, I = experts.front().gate.rows, n = T * k;
  const ExpertGroups g = group_by_expert(r, E);
  const kernels::Ints source = be.upload(g.source), slot = be.upload(g.slot);
  const kernels::Floats weights = be.upload(r.weights);

  kernels::Floats xs = be.array<float>(n * H), gate = be.array<float>(n * I),
                  up = be.array<float>(n * I), ys = be.array<float>(n * H);
  be.gather_rows(h, source.data(), n, H, xs.data());
  // Every active expert's gate and up projections in one call, then every down projection.
  std::vector<kernels::LinearJob> jobs;
  for (int64_t e = 0; e < E; ++e) {
    if (g.count[e] == 0) continue;
    const ExpertWeights& x = experts[e];
    const int64_t at = g.first[e];
    jobs.push_back({xs.data() + at * H, g.count[e], &x.gate, nullptr, gate.data() + at * I});
    jobs.push_back({xs.data() + at * H, g.count[e], &x.up, nullptr, up.data() + at * I});
  }
  be.linear_grouped(jobs);
  if (gelu_tanh) be.gelu_tanh_mul(gate.data(), up.data(), gate.data(), n * I);
  else be.silu_mul(gate.data(), up.data(), gate.data(), n * I);
  jobs.clear();
  for (int64_t e = 0; e < E; ++e) {
    if (g.count[e] == 0) continue;
    const int64_t at = g.first[e];
    jobs.push_back({gate.data() + at * I, g.count[e], &experts[e].down, nullptr,
                    ys.data() + at * H});
  }
  be.linear_grouped(jobs);
  // Each token's fixed-order combination, its rank j's row found through slot.
  be.moe_combine(ys.data(), slot.data(), weights.data(), T, k, H, shared, shared_gate, out);
}

ExpertSet expert_set(std::span<const ExpertWeights> experts, const kernels::Backend& be,
                     const MlpWeights* shared) {
  ExpertSet s;
  for (const ExpertWeights& x : experts) {
    s.gate_up.push_back(&x.gate);
    s.gate_up.push_back(&x.up);
    s.down.push_back(&x.down);
  }
  s.on_device = !experts.empty() && be.moe_on_device(s.gate_up) && be.moe_on_device(s.down);
  if (s.on_device && shared && !shared->gelu_tanh && shared->gate_bias.empty() &&
      shared->up_bias.empty() && shared->down_bias.empty()) {
    ExpertSet with = s;
    with.gate_up.push_back(&shared->gate);
    with.gate_up.push_back(&shared->up);
    with.down.push_back(&shared->down);
    // moe_on_device: every weight of one shape and format, so the shared expert's size must be the
    // routed ones' (Qwen3.5-35B-A3B, Qwen3-Next: 512 and 512).
    if (be.moe_on_device(with.gate_up) && be.moe_on_device(with.down)) {
      with.holds_shared = true;
      return with;
    }
  }
  return s;
}

bool shared_in_groups(const ExpertSet& set, int64_t T) {
  return set.holds_shared &&
         (routes_on_device(set, T) || set.gate_up.front()->quant == kernels::QuantFormat::None);
}

DeviceRouting route_on_device(const float* logits, int64_t T, int64_t E, int64_t k,
                              bool normalize, const float* expert_scale, kernels::Backend& be,
                              bool shared) {
  if (T > kernels::kMoeDeviceMaxTokens)
    fail("MoE device routing: ", T, " tokens (at most ", kernels::kMoeDeviceMaxTokens, ")");
  const int64_t n = T * k, rows = n + (shared ? T : 0);
  DeviceRouting r{be.array<int32_t>(n),    be.array<float>(n),
                  be.array<int32_t>(rows), be.array<int32_t>(n),
                  be.array<int32_t>(kernels::moe_groups_size(T, k, E, shared)), T, k};
  be.moe_route_group(logits, T, E, k, normalize, expert_scale, shared, r.experts.data(),
                     r.weights.data(), r.source.data(), r.slot.data(), r.groups.data());
  r.max_rows = T;
  r.shared = shared;
  return r;
}

Routing route_on_backend(const float* logits, int64_t T, int64_t E, int64_t k, bool normalize,
                         const float* expert_scale, kernels::Backend& be) {
  kernels::Ints experts = be.array<int32_t>(T * k);
  kernels::Floats weights = be.array<float>(T * k);
  be.moe_route(logits, T, E, k, normalize, expert_scale, experts.data(), weights.data());
  Routing r;
  r.tokens = T;
  r.k = k;
  r.experts = be.download(experts.data(), T * k);
  r.weights = be.download(weights.data(), T * k);
  return r;
}

Routing route_to_host(const ExpertSet& set, const float* logits, int64_t T, int64_t E, int64_t k,
                      bool normalize, std::span<const float> expert_scale,
                      const float* expert_scale_dev, kernels::Backend& be) {
  if (set.on_device)
    return route_on_backend(logits, T, E, k, normalize,
                            expert_scale.empty() ? nullptr : expert_scale_dev, be);
  Routing r = route_tokens(be.download(logits, T * E), T, E, k, normalize, &be.threads());
  if (!expert_scale.empty())
    for (size_t i = 0; i < r.weights.size(); ++i) r.weights[i] *= expert_scale[r.experts[i]];
  return r;
}

DeviceRouting upload_routing(const Routing& r, int64_t E, kernels::Backend& be, bool shared) {
  ExpertGroups g = group_by_expert(r, E);
  // moe_route_group's table: the active experts, then (expert, first row, rows) for each.
  std::vector<int32_t> groups = {0};
  int64_t max_rows = 0;
  auto add = [&](int64_t e, int64_t first, int64_t count) {
    ++groups[0];
    groups.insert(groups.end(), {static_cast<int32_t>(e), static_cast<int32_t>(first),
                                 static_cast<int32_t>(count)});
    max_rows = std::max(max_rows, count);
  };
  for (int64_t e = 0; e < E; ++e)
    if (g.count[e] > 0) add(e, g.first[e], g.count[e]);
  const int64_t n = r.tokens * r.k;
  if (shared) {  // the shared expert (id E) over every token, after the routed rows
    add(E, n, r.tokens);
    for (int64_t t = 0; t < r.tokens; ++t) g.source.push_back(static_cast<int32_t>(t));
  }
  DeviceRouting d{be.upload(r.experts), be.upload(r.weights), be.upload(g.source),
                  be.upload(g.slot),    be.upload(groups),    r.tokens, r.k};
  d.max_rows = max_rows;
  d.shared = shared;
  return d;
}

void routed_experts_forward_host_routed(const ExpertSet& set,
                                        std::span<const ExpertWeights> experts, bool gelu_tanh,
                                        const float* h, int64_t T, const Routing& r,
                                        const float* shared, const float* shared_gate, float* out,
                                        kernels::Backend& be) {
  // Quantized experts keep one launch per expert here: their grouped kernel is the skinny one,
  // built for a step's few rows, and a prefill chunk's expert holds about T k / E of them.
  if (!set.on_device || set.gate_up.front()->quant != kernels::QuantFormat::None)
    return routed_experts_forward(experts, gelu_tanh, h, T, r, shared, shared_gate, out, be);
  const DeviceRouting d =
      upload_routing(r, static_cast<int64_t>(experts.size()), be, shared_in_groups(set, T));
  routed_experts_forward_device(set, gelu_tanh, h, d, shared, shared_gate, out, be);
}

// The device form of routed_experts_forward: the same ops, with group_by_expert done by moe_group
// and the per-expert jobs of each linear_grouped call done by one linear_experts launch that reads
// the active experts and their rows from the groups table.
void routed_experts_forward_device(const ExpertSet& set, bool gelu_tanh, const float* h,
                                   const DeviceRouting& r, const float* shared,
                                   const float* shared_gate, float* out, kernels::Backend& be) {
  if (!set.on_device) fail("routed_experts_forward_device: the backend does not run these experts");
  if (r.shared && (!set.holds_shared || shared))
    fail("routed_experts_forward_device: the routing groups the shared expert, but the set does "
         "not hold it or its output was also given");
  const int64_t T = r.T, k = r.k, n = T * k, rows = n + (r.shared ? T : 0);
  const int64_t H = set.gate_up.front()->cols, I = set.gate_up.front()->rows;
  const int32_t* const source = r.source.data();
  const int32_t* const slot = r.slot.data();
  const int32_t* const groups = r.groups.data();
  const float* const weights = r.weights.data();
  kernels::Floats gate = be.array<float>(rows * I), up = be.array<float>(rows * I),
                  ys = be.array<float>(rows * H);
  // The gate/up launch reads each grouped row's token where it is (source), the combination each
  // rank's row where it landed (slot): no gathered copies.
  float* const gate_up[2] = {gate.data(), up.data()};
  be.linear_experts(set.gate_up, 2, h, source, gate_up, groups, r.max_rows, rows);
  if (gelu_tanh) be.gelu_tanh_mul(gate.data(), up.data(), gate.data(), rows * I);
  else be.silu_mul(gate.data(), up.data(), gate.data(), rows * I);
  float* const down[1] = {ys.data()};
  be.linear_experts(set.down, 1, gate.data(), nullptr, down, groups, r.max_rows, rows);
  // The shared expert's rows follow the routed ones, token by token.
  if (r.shared) shared = ys.data() + n * H;
  be.moe_combine(ys.data(), slot, weights, T, k, H, shared, shared_gate, out);
}

int64_t feed_forward_record_limit(const FeedForward& ffn, int64_t dense_limit) {
  return ffn.moe ? experts_record_limit(ffn.moe->set, dense_limit) : dense_limit;
}

FeedForward load_feed_forward(const Checkpoint& ckpt, const ModelConfig& c,
                              const std::string& prefix, bool moe, kernels::Backend& be) {
  FeedForward f;
  if (moe) f.moe = load_moe(ckpt, c, prefix, be);
  else f.dense = load_mlp(ckpt, c, prefix, be);
  return f;
}

void feed_forward(const FeedForward& ffn, const float* h, int64_t T, float* out,
                  kernels::Backend& be) {
  if (ffn.moe) moe_forward(*ffn.moe, h, T, out, be);
  else mlp_forward(ffn.dense, h, T, out, be);
}

}  // namespace lockstep
