// Gemma 4 forward (transformers' modeling_gemma4.py, text path):
//   x = embed(ids) * sqrt(hidden)
//   per-layer inputs (hidden_size_per_layer_input P > 0), for all layers at once:
//     ple = (rms_norm(linear(x, per_layer_model_projection) * hidden^-0.5 per P-chunk)
//            + embed_per_layer(ids) * sqrt(P)) * 2^-0.5
//   per layer l:
//     x += post_attention_norm(attn(input_norm(x)))
//     m = mlp(pre_feedforward_norm(x))
//     MoE block: m = post_ffn_norm_1(m) + post_ffn_norm_2(experts(pre_ffn_norm_2(x)))
//                routed by router(x): softmax of proj(rms_norm(x) * scale * hidden^-0.5), top k
//                renormalised, times per_expert_scale
//     x += post_feedforward_norm(m)
//     P > 0: x += post_per_layer_input_norm(proj(gelu_tanh(gate(x)) * ple[l]))
//     x *= layer_scalar
//   logits = softcap(lm_head(norm(x)))
// Norms are plain (x_normed * w); q and k are normed per head, values by a weightless RMSNorm;
// scores are not scaled. Sliding layers see the last sliding_window positions. A KV-sharing
// layer computes only its queries and attends to its source layer's cache: the same keys and
// values at the same absolute positions, so sharing changes memory, never bits.
#include "models/gemma4.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "models/attention_layer.h"
#include "models/forward_common.h"
#include "models/gemma_common.h"
#include "models/kv_model.h"
#include "models/moe_layer.h"
#include "models/moe_routing.h"
#include "models/weights.h"

namespace lockstep {

kernels::RopeTable gemma4_rope_table(const ModelConfig::Gemma4::Rope& rope, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  // Python: int(partial_rotary_factor * head_dim // 2).
  const int64_t rotated =
      rope.type == "proportional"
          ? static_cast<int64_t>(std::floor(rope.partial_rotary_factor * head_dim / 2.0))
          : half;
  std::vector<float> inv(half, 0.0f);
  for (int64_t i = 0; i < rotated && i < half; ++i) {
    // transformers: base ** (arange(0, 2 * rotated, 2) / head_dim) with a float32 exponent.
    const double f =
        1.0 / std::pow(rope.theta, static_cast<double>(static_cast<float>(2 * i) / head_dim));
    inv[i] = static_cast<float>(static_cast<float>(f) / rope.factor);
  }
  return kernels::RopeTable(std::move(inv), 1.0f);
}

namespace {

struct Gemma4Attention {
  kernels::Weight q, k, v, o;  // k, v unused when sharing; v unused when values are keys
  kernels::Floats q_norm, k_norm, v_norm_ones;
  int64_t head_dim = 0, kv_heads = 0;
  bool shares_kv = false, values_are_keys = false;
};

struct Gemma4Moe {
  kernels::Weight router;                // [E][H]
  kernels::Floats router_scale;          // [H]
  std::vector<float> per_expert_scale;   // [E], host: multiplies the routing weights
  kernels::Floats per_expert_scale_dev;  // the same in backend memory (device routing)
  std::vector<ExpertWeights> experts;
  ExpertSet set;                         // the device path's view of `experts`
  kernels::Floats post_norm_1, pre_norm_2, post_norm_2;
  int64_t top_k = 0;
};

struct Gemma4Layer {
  kernels::Floats input_norm, post_attention_norm, pre_feedforward_norm, post_feedforward_norm;
  Gemma4Attention attn;
  MlpWeights mlp;
  std::unique_ptr<Gemma4Moe> moe;
  // Per-layer input (P > 0).
  kernels::Weight ple_gate, ple_projection;  // [P][H], [H][P]
  kernels::Floats ple_post_norm;
  float layer_scalar = 1.0f;
  int64_t window = 0;    // 0: full attention
  int64_t kv_cache = 0;  // the KvPool layer it writes or (sharing) reads
};

// The CUDA attention kernels take head_dim 64, 128, 256 and 512 (the published models' sliding
// and full layers); any other is refused here before any weight moves.
std::unique_ptr<kernels::Backend> gemma4_backend(const ModelConfig& c, const ModelOptions& o) {
  if (o.device != kernels::Device::Cpu)
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const int64_t hd = c.head_dim_of(l);
      if (hd != 64 && hd != 128 && hd != 256 && hd != 512)
        fail(c.source, ": layer ", l, " has head_dim ", hd, "; the CUDA attention kernels "
             "support 64, 128, 256 and 512; use --device cpu");
    }
  return kernels::make_backend(o.device, o.pool);
}

// One KvPool layer per layer that computes its own keys and values.
std::vector<KvLayerShape> kv_shapes(const ModelConfig& c) {
  std::vector<KvLayerShape> shapes;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.gemma4.kv_source[l] == l) shapes.push_back({c.kv_heads_of(l), c.head_dim_of(l)});
  return shapes;
}

// The first layer of each kind (sliding / full): whose head dim that kind's RoPE table spans.
int64_t head_dim_of_kind(const ModelConfig& c, bool sliding) {
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (static_cast<bool>(c.sliding_layers[l]) == sliding) return c.head_dim_of(l);
  return c.head_dim;
}

class Gemma4Model final : public KvModel {
 public:
  Gemma4Model(const ModelConfig& c, const std::string& dir, const ModelOptions& o)
      : KvModel(c, dir, o, gemma4_backend(c, o), kv_shapes(c)),
        rope_sliding_(gemma4_rope_table(c.gemma4.sliding_rope, head_dim_of_kind(c, true))),
        rope_full_(gemma4_rope_table(c.gemma4.full_rope, head_dim_of_kind(c, false))) {
    const Checkpoint& w = *ckpt_;
    kernels::Backend& be = *be_;
    const GemmaNames names = gemma_tensor_names(w, c);
    const std::string& p = names.prefix;
    const int64_t H = c.hidden_size, L = c.num_hidden_layers;
    const int64_t P = c.gemma4.per_layer_input_size;
    // Tied, the table is the lm_head's weight too; else it is only looked up.
    const bool tied = c.tie_word_embeddings && !w.has(names.lm_head);
    const kernels::Weight embed = matrix(w, p + "embed_tokens.weight", c.vocab_size, H);
    embed_ = tied ? be.place_column_parallel(embed) : be.place_table(embed);
    embed_scale_ = gemma_embed_scale(H, gemma_embedding_dtype(w, p + "embed_tokens.weight"));
    if (P > 0) {
      const std::string table = p + "embed_tokens_per_layer.weight";
      ple_table_ = be.place_table(matrix(w, table, c.gemma4.per_layer_vocab, L * P));
      ple_scale_ = gemma_embed_scale(P, gemma_embedding_dtype(w, table));
      ple_model_projection_ =
          be.place(matrix(w, p + "per_layer_model_projection.weight", L * P, H));
      ple_projection_norm_ = be.upload(vector_f32(w, p + "per_layer_projection_norm.weight", P));
    }
    std::vector<int64_t> cache_of(L, -1);
    for (int64_t l = 0, next = 0; l < L; ++l)
      cache_of[l] = c.gemma4.kv_source[l] == l ? next++ : cache_of[c.gemma4.kv_source[l]];
    for (int64_t l = 0; l < L; ++l) {
      layers_.push_back(load_layer(w, c, p + "layers." + std::to_string(l) + ".", l, be));
      layers_.back().kv_cache = cache_of[l];
    }
    final_norm_ = be.upload(vector_f32(w, p + "norm.weight", H));
    lm_head_ =
        tied ? embed_ : be.place_column_parallel(matrix(w, names.lm_head, c.vocab_size, H));
    lend_kv(cache_of);
  }

  const SharedKvSource* shared_kv_source() const override { return &lent_; }

  ForwardResult forward(std::span<const ForwardItem> items) override {
    const ModelConfig& c = config_;
    const int64_t H = c.hidden_size;
    kernels::Backend& be = *be_;
    // A step reads nothing back mid-forward (MoE layers route on the device up to
    // kMoeDeviceMaxTokens, else on the host: then never recorded), so a backend may record and
    // replay it.
    const int64_t limit = record_limit();
    const std::string key = limit > 0 ? graph_key("gemma4", items, c.vocab_size, limit) : "";
    RecordedStep step(be, key);
    FlatBatch b = flatten_batch(items, kv_, rope_sliding_, c.max_position_embeddings,
                                c.vocab_size, be, !key.empty());
    const int64_t T = static_cast<int64_t>(b.tokens.size());
    // The full layers' cos/sin: the same positions through their own table.
    std::vector<float> full_host(T * rope_full_.rotary_dim());
    rope_full_.fill(b.rows.positions.data(), T, full_host.data());
    const kernels::Floats full_cos_sin = be.upload(full_host);

    kernels::Floats x = be.array<float>(T * H);
    be.embedding(embed_, b.device_tokens.data(), T, x.data());
    be.scale(x.data(), T * H, embed_scale_);
    const kernels::Floats ple = per_layer_inputs(x.data(), b, T);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const float* cos_sin = layers_[l].window > 0 ? b.rows.cos_sin.data() : full_cos_sin.data();
      layer_forward(layers_[l], l, x.data(), T, b.rows, cos_sin, ple);
    }
    const OutputHead head{&final_norm_, lm_head_, static_cast<float>(c.rms_norm_eps), false,
                          static_cast<float>(c.final_logit_softcapping)};
    return finish_forward(items, b, x.data(), H, head, be);
  }

 private:
  // The most tokens a recorded step may hold: the dense bound, or the device-routing bound when a
  // layer has experts (0 when one routes on the host).
  int64_t record_limit() const {
    int64_t limit = kRecordedMaxTokens;
    for (const Gemma4Layer& L : layers_)
      if (L.moe) limit = experts_record_limit(L.moe->set, limit);
    return limit;
  }

  Gemma4Layer load_layer(const Checkpoint& w, const ModelConfig& c, const std::string& lp,
                         int64_t l, kernels::Backend& be) {
    const int64_t H = c.hidden_size, P = c.gemma4.per_layer_input_size;
    Gemma4Layer layer;
    layer.input_norm = be.upload(vector_f32(w, lp + "input_layernorm.weight", H));
    layer.post_attention_norm = be.upload(vector_f32(w, lp + "post_attention_layernorm.weight", H));
    layer.pre_feedforward_norm =
        be.upload(vector_f32(w, lp + "pre_feedforward_layernorm.weight", H));
    layer.post_feedforward_norm =
        be.upload(vector_f32(w, lp + "post_feedforward_layernorm.weight", H));
    layer.window = c.attention_window(l);
    layer.layer_scalar = vector_f32(w, lp + "layer_scalar", 1).front();

    Gemma4Attention& a = layer.attn;
    a.head_dim = c.head_dim_of(l);
    a.kv_heads = c.kv_heads_of(l);
    a.shares_kv = c.gemma4.kv_source[l] != l;
    a.values_are_keys = c.gemma4.k_eq_v && layer.window == 0;
    const std::string ap = lp + "self_attn.";
    const int64_t qd = c.num_attention_heads * a.head_dim, kvd = a.kv_heads * a.head_dim;
    a.q = be.place_column_parallel(matrix(w, ap + "q_proj.weight", qd, H));
    a.o = be.place_row_parallel(matrix(w, ap + "o_proj.weight", H, qd));
    a.q_norm = be.upload(vector_f32(w, ap + "q_norm.weight", a.head_dim));
    if (!a.shares_kv) {
      a.k = be.place_column_parallel(matrix(w, ap + "k_proj.weight", kvd, H));
      if (!a.values_are_keys)
        a.v = be.place_column_parallel(matrix(w, ap + "v_proj.weight", kvd, H));
      else if (w.has(ap + "v_proj.weight"))
        fail(w.dir(), ": tensor ", ap, "v_proj.weight exists, but attention_k_eq_v says layer ",
             l, "'s values are its keys");
      a.k_norm = be.upload(vector_f32(w, ap + "k_norm.weight", a.head_dim));
      a.v_norm_ones = be.upload(std::vector<float>(a.head_dim, 1.0f));
    }

    // KV-sharing layers are double-wide when use_double_wide_mlp.
    const bool wide = c.gemma4.double_wide_mlp && a.shares_kv;
    layer.mlp = load_mlp(w, c, lp + "mlp.", be, c.intermediate_size * (wide ? 2 : 1));
    if (c.gemma4.moe_block) layer.moe = load_moe_block(w, c, lp, be);
    if (P > 0) {
      layer.ple_gate = be.place(matrix(w, lp + "per_layer_input_gate.weight", P, H));
      layer.ple_projection = be.place(matrix(w, lp + "per_layer_projection.weight", H, P));
      layer.ple_post_norm = be.upload(vector_f32(w, lp + "post_per_layer_input_norm.weight", H));
    }
    return layer;
  }

  std::unique_ptr<Gemma4Moe> load_moe_block(const Checkpoint& w, const ModelConfig& c,
                                            const std::string& lp, kernels::Backend& be) {
    const int64_t H = c.hidden_size, E = c.num_experts;
    auto m = std::make_unique<Gemma4Moe>();
    m->router = be.place(matrix(w, lp + "router.proj.weight", E, H));
    m->router_scale = be.upload(vector_f32(w, lp + "router.scale", H));
    m->per_expert_scale = vector_f32(w, lp + "router.per_expert_scale", E);
    m->experts = load_experts(w, c, lp, be);
    m->set = expert_set(m->experts, be);
    if (m->set.on_device) m->per_expert_scale_dev = be.upload(m->per_expert_scale);
    m->post_norm_1 = be.upload(vector_f32(w, lp + "post_feedforward_layernorm_1.weight", H));
    m->pre_norm_2 = be.upload(vector_f32(w, lp + "pre_feedforward_layernorm_2.weight", H));
    m->post_norm_2 = be.upload(vector_f32(w, lp + "post_feedforward_layernorm_2.weight", H));
    m->top_k = c.num_experts_per_tok;
    return m;
  }

  // [T][L][P] per-layer inputs (empty when the model has none).
  kernels::Floats per_layer_inputs(const float* x, const FlatBatch& b, int64_t T) {
    const ModelConfig& c = config_;
    const int64_t P = c.gemma4.per_layer_input_size, L = c.num_hidden_layers, H = c.hidden_size;
    if (P == 0) return {};
    kernels::Backend& be = *be_;
    const float eps = static_cast<float>(c.rms_norm_eps);
    const int64_t n = T * L * P;
    kernels::Floats token = be.array<float>(n), context = be.array<float>(n);
    be.embedding(ple_table_, b.device_tokens.data(), T, token.data());
    be.scale(token.data(), n, ple_scale_);
    be.linear(x, T, ple_model_projection_, nullptr, context.data());
    // transformers: Python floats hidden_size**-0.5 and 2.0**-0.5, applied in float32.
    be.scale(context.data(), n, static_cast<float>(std::pow(static_cast<double>(H), -0.5)));
    be.rms_norm(context.data(), T * L, P, ple_projection_norm_.data(), eps, false, context.data());
    be.add(context.data(), token.data(), n);
    be.scale(context.data(), n, static_cast<float>(std::pow(2.0, -0.5)));
    return context;
  }

  void attention(const Gemma4Attention& a, const float* h, int64_t T, const BatchRows& rows,
                 const float* cos_sin, int64_t window, int64_t cache, float* out) {
    const ModelConfig& c = config_;
    kernels::Backend& be = *be_;
    const int64_t nh = c.num_attention_heads, hd = a.head_dim, nkv = a.kv_heads;
    const float eps = static_cast<float>(c.rms_norm_eps);
    const kernels::KvLayerView view = kv_.layer(cache);
    kernels::Floats q = be.array<float>(T * nh * hd);
    if (a.shares_kv) {
      // Queries only (the bits attention_prep would give them); the keys are the source's.
      be.linear(h, T, a.q, nullptr, q.data());
      be.rms_norm(q.data(), T * nh, hd, a.q_norm.data(), eps, false, q.data());
      be.rope(q.data(), T, nh, hd, hd, cos_sin);
    } else {
      kernels::Floats k = be.array<float>(T * nkv * hd), v = be.array<float>(T * nkv * hd);
      std::vector<kernels::LinearOut> outs = {{&a.q, nullptr, q.data()}, {&a.k, nullptr, k.data()}};
      if (!a.values_are_keys) outs.push_back({&a.v, nullptr, v.data()});
      be.linear_multi(h, T, outs);
      if (a.values_are_keys) be.copy(v.data(), k.data(), T * nkv * hd * sizeof(float));
      be.rms_norm(v.data(), T * nkv, hd, a.v_norm_ones.data(), eps, false, v.data());
      kernels::AttentionPrep prep;
      prep.q_in = q.data();
      prep.q_in_stride = hd;
      prep.q = q.data();
      prep.k = k.data();
      prep.v = v.data();
      prep.T = T;
      prep.n_heads = nh;
      prep.q_norm = a.q_norm.data();
      prep.k_norm = a.k_norm.data();
      prep.eps = eps;
      prep.zero_centered = false;
      prep.rotary_dim = hd;
      prep.cos_sin = cos_sin;
      prep.slots = rows.slots.data();
      be.attention_prep(prep, view);
    }
    kernels::Floats attn = be.array<float>(T * nh * hd);
    kernels::AttentionBatch batch = rows.attn;
    batch.window = window;
    be.attention(q.data(), T, batch, nh, view, 1.0f, attn.data());
    be.linear(attn.data(), T, a.o, nullptr, out);
  }

  // m = post_ffn_norm_1(m) + post_ffn_norm_2(experts(pre_ffn_norm_2(x))), routed by x.
  void moe_block(const Gemma4Moe& m, const float* x, int64_t T, float* mlp_out) {
    const ModelConfig& c = config_;
    kernels::Backend& be = *be_;
    const int64_t H = c.hidden_size, E = static_cast<int64_t>(m.experts.size());
    const float eps = static_cast<float>(c.rms_norm_eps);
    kernels::Floats routed_in = be.array<float>(T * H), logits = be.array<float>(T * E);
    be.rms_norm(x, T, H, m.router_scale.data(), eps, false, routed_in.data());
    be.scale(routed_in.data(), T * H, static_cast<float>(std::pow(static_cast<double>(H), -0.5)));
    be.linear(routed_in.data(), T, m.router, nullptr, logits.data());
    kernels::Floats expert_out = be.array<float>(T * H);
    be.rms_norm(x, T, H, m.pre_norm_2.data(), eps, false, routed_in.data());  // the experts' input
    if (routes_on_device(m.set, T)) {
      // Routed on the device (route_tokens' bits, per_expert_scale applied as below): no read
      // back in the middle of the forward.
      const DeviceRouting r = route_on_device(logits.data(), T, E, m.top_k, true,
                                              m.per_expert_scale_dev.data(), be);
      routed_experts_forward_device(m.set, true, routed_in.data(), r, nullptr, nullptr,
                                    expert_out.data(), be);
    } else {
      const Routing r = route_to_host(m.set, logits.data(), T, E, m.top_k, true,
                                      m.per_expert_scale, m.per_expert_scale_dev.data(), be);
      routed_experts_forward_host_routed(m.set, m.experts, true, routed_in.data(), T, r, nullptr,
                                         nullptr, expert_out.data(), be);
    }
    be.rms_norm(expert_out.data(), T, H, m.post_norm_2.data(), eps, false, expert_out.data());
    be.rms_norm(mlp_out, T, H, m.post_norm_1.data(), eps, false, mlp_out);
    be.add(mlp_out, expert_out.data(), T * H);
  }

  void layer_forward(const Gemma4Layer& L, int64_t l, float* x, int64_t T, const BatchRows& rows,
                     const float* cos_sin, const kernels::Floats& ple) {
    const ModelConfig& c = config_;
    kernels::Backend& be = *be_;
    const int64_t H = c.hidden_size, P = c.gemma4.per_layer_input_size;
    const int64_t n_layers = c.num_hidden_layers;
    const float eps = static_cast<float>(c.rms_norm_eps);
    kernels::Floats h = be.array<float>(T * H), delta = be.array<float>(T * H);
    be.rms_norm(x, T, H, L.input_norm.data(), eps, false, h.data());
    attention(L.attn, h.data(), T, rows, cos_sin, L.window, L.kv_cache, delta.data());
    be.rms_norm(delta.data(), T, H, L.post_attention_norm.data(), eps, false, delta.data());
    be.add(x, delta.data(), T * H);

    be.rms_norm(x, T, H, L.pre_feedforward_norm.data(), eps, false, h.data());
    mlp_forward(L.mlp, h.data(), T, delta.data(), be);
    if (L.moe) moe_block(*L.moe, x, T, delta.data());
    be.rms_norm(delta.data(), T, H, L.post_feedforward_norm.data(), eps, false, delta.data());
    be.add(x, delta.data(), T * H);

    if (P > 0) {
      kernels::Floats gate = be.array<float>(T * P), input = be.array<float>(T * P);
      be.copy_2d(input.data(), P, ple.data() + l * P, n_layers * P, T, P);  // layer l's slice
      be.linear(x, T, L.ple_gate, nullptr, gate.data());
      be.gelu_tanh_mul(gate.data(), input.data(), gate.data(), T * P);
      be.linear(gate.data(), T, L.ple_projection, nullptr, delta.data());
      be.rms_norm(delta.data(), T, H, L.ple_post_norm.data(), eps, false, delta.data());
      be.add(x, delta.data(), T * H);
    }
    be.scale(x, T * H, L.layer_scalar);
  }

  // What an assistant drafter reads (transformers' shared_kv_states): the cache of the last
  // layer of each kind that computes its own KV (its store_full_length_kv layer).
  void lend_kv(const std::vector<int64_t>& cache_of) {
    const ModelConfig& c = config_;
    lent_.config = &config_;
    lent_.backend = be_.get();
    lent_.kv = &kv_;
    lent_.embed = embed_;
    lent_.embed_scale = embed_scale_;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      if (c.gemma4.kv_source[l] != l) continue;
      (c.sliding_layers[l] ? lent_.sliding_kv_layer : lent_.full_kv_layer) = cache_of[l];
      (c.sliding_layers[l] ? lent_.sliding_source : lent_.full_source) = l;
    }
  }

  SharedKvSource lent_;
  kernels::RopeTable rope_sliding_, rope_full_;
  kernels::Weight embed_, lm_head_;
  float embed_scale_ = 1.0f;
  kernels::Weight ple_table_, ple_model_projection_;
  kernels::Floats ple_projection_norm_;
  float ple_scale_ = 1.0f;
  std::vector<Gemma4Layer> layers_;
  kernels::Floats final_norm_;
};

}  // namespace

std::unique_ptr<Model> load_gemma4_model(const ModelConfig& config, const std::string& dir,
                                         const ModelOptions& options) {
  return std::make_unique<Gemma4Model>(config, dir, options);
}

}  // namespace lockstep
