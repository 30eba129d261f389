#include "models/moe_layer.h"

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
  return m;
}

// Tokens grouped by expert (expert order, tokens ascending within one): assignment (t, j) of
// token t's rank-j expert sits at row slot[t * k + j] of the grouped buffers; source[row] is its
// token.
struct ExpertGroups {
  std::vector<int32_t> source, slot;
  std::vector<int64_t> first, count;  // per expert: first grouped row, rows
};

ExpertGroups group_by_expert(const Routing& r, int64_t E) {
  ExpertGroups g;
  const int64_t n = r.tokens * r.k;
  g.count.assign(E, 0);
  for (int32_t e : r.experts) ++g.count[e];
  g.first.assign(E, 0);
  for (int64_t e = 1; e < E; ++e) g.first[e] = g.first[e - 1] + g.count[e - 1];
  std::vector<int64_t> next = g.first;
  g.source.resize(n);
  g.slot.resize(n);
  for (int64_t i = 0; i < n; ++i) {  // i = t * k + j, so tokens ascend within each expert
    const int64_t row = next[r.experts[i]]++;
    g.source[row] = static_cast<int32_t>(i / r.k);
    g.slot[i] = static_cast<int32_t>(row);
  }
  return g;
}

void moe_forward(const MoeWeights& m, const float* h, int64_t T, float* out,
                 kernels::Backend& be) {
  const int64_t E = static_cast<int64_t>(m.experts.size()), H = m.router.cols;
  kernels::Floats logits = be.array<float>(T * E);
  be.linear(h, T, m.router, nullptr, logits.data());
  const Routing r = route_tokens(be.download(logits.data(), T * E), T, E, m.top_k, m.normalize);
  if (!m.has_shared) {
    routed_experts_forward(m.experts, false, h, T, r, nullptr, nullptr, out, be);
    return;
  }
  kernels::Floats shared = be.array<float>(T * H), shared_gate = be.array<float>(T);
  mlp_forward(m.shared, h, T, shared.data(), be);
  be.linear(h, T, m.shared_gate, nullptr, shared_gate.data());
  routed_experts_forward(m.experts, false, h, T, r, shared.data(), shared_gate.data(), out, be);
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
  // Back into (token, rank) order, then each token's fixed-order combination.
  kernels::Floats ranked = be.array<float>(n * H);
  be.gather_rows(ys.data(), slot.data(), n, H, ranked.data());
  be.moe_combine(ranked.data(), weights.data(), T, k, H, shared, shared_gate, out);
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
