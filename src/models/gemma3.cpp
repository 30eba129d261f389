// Gemma 3 forward (transformers' modeling_gemma3.py, text path):
//   x = embed(ids) * embed_scale
//   per layer: x += post_attention_norm(attn(input_norm(x)))
//              x += post_feedforward_norm(mlp(pre_feedforward_norm(x)))
//   logits = softcap(lm_head(norm(x)))
// Every norm is zero-centred (x_normed * (1 + w)), q and k included. Sliding layers see the last
// sliding_window positions and rotate with rope_local_theta; global layers see every position
// and rotate with rope_theta (and its scaling). Scores are scaled by query_pre_attn_scalar^-0.5.
#include "models/gemma3.h"

#include <cmath>

#include "core/error.h"
#include "models/attention_layer.h"
#include "models/forward_common.h"
#include "models/gemma_common.h"
#include "models/kv_model.h"
#include "models/rope_freqs.h"
#include "models/weights.h"

namespace lockstep {

namespace {

struct Gemma3Layer {
  kernels::Floats input_norm, post_attention_norm, pre_feedforward_norm, post_feedforward_norm;
  AttentionWeights attn;
  MlpWeights mlp;
  int64_t window = 0;  // 0: global layer
};

// The config with the sliding layers' RoPE in place of the global one (make_rope_table reads
// rope_theta / rope_scaling).
ModelConfig local_rope_config(const ModelConfig& c) {
  ModelConfig l = c;
  l.rope_theta = c.rope_local_theta;
  l.rope_scaling = c.rope_local_scaling;
  return l;
}


class Gemma3Model final : public KvModel {
 public:
  Gemma3Model(const ModelConfig& c, const std::string& dir, const ModelOptions& o)
      : KvModel(c, dir, o, kernels::make_backend(o.device, o.pool), uniform_kv(c)),
        rope_global_(make_rope_table(c)),
        rope_local_(make_rope_table(local_rope_config(c))) {
    if (!c.zero_centered_norm || !c.qk_norm || c.attn_output_gate)
      fail(c.source, ": ", c.model_type, " expects zero-centred norms and q/k norm, no gate");
    const Checkpoint& w = *ckpt_;
    kernels::Backend& be = *be_;
    const GemmaNames names = gemma_tensor_names(w, c);
    const std::string& p = names.prefix;
    const int64_t H = c.hidden_size;
    // Tied, the table is the lm_head's weight too; else it is only looked up.
    const bool tied = c.tie_word_embeddings && !w.has(names.lm_head);
    const kernels::Weight embed = matrix(w, p + "embed_tokens.weight", c.vocab_size, H);
    embed_ = tied ? be.place_column_parallel(embed) : be.place_table(embed);
    embed_scale_ = gemma_embed_scale(H, gemma_embedding_dtype(w, p + "embed_tokens.weight"));
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string lp = p + "layers." + std::to_string(l) + ".";
      Gemma3Layer layer;
      layer.input_norm = be.upload(vector_f32(w, lp + "input_layernorm.weight", H));
      layer.post_attention_norm =
          be.upload(vector_f32(w, lp + "post_attention_layernorm.weight", H));
      layer.pre_feedforward_norm =
          be.upload(vector_f32(w, lp + "pre_feedforward_layernorm.weight", H));
      layer.post_feedforward_norm =
          be.upload(vector_f32(w, lp + "post_feedforward_layernorm.weight", H));
      layer.attn = load_attention(w, c, lp + "self_attn.", be);
      layer.mlp = load_mlp(w, c, lp + "mlp.", be);
      layer.window = c.attention_window(l);
      layers_.push_back(std::move(layer));
    }
    final_norm_ = be.upload(vector_f32(w, p + "norm.weight", H));
    lm_head_ =
        tied ? embed_ : be.place_column_parallel(matrix(w, names.lm_head, c.vocab_size, H));
    // transformers: scaling = query_pre_attn_scalar ** -0.5 (a Python float).
    attn_scale_ = static_cast<float>(std::pow(c.query_pre_attn_scalar, -0.5));
  }

  ForwardResult forward(std::span<const ForwardItem> items) override {
    const ModelConfig& c = config_;
    const int64_t H = c.hidden_size;
    kernels::Backend& be = *be_;
    // A decode or verify step reads nothing back mid-forward: a backend may record and replay it.
    const std::string key = graph_key("gemma3", items, c.vocab_size);
    RecordedStep step(be, key);
    FlatBatch b = flatten_batch(items, kv_, rope_global_, c.max_position_embeddings,
                                c.vocab_size, be, !key.empty());
    const int64_t T = static_cast<int64_t>(b.tokens.size());
    const float eps = static_cast<float>(c.rms_norm_eps);
    // The sliding layers' cos/sin: the same positions through their own table.
    std::vector<float> local_host(T * rope_local_.rotary_dim());
    rope_local_.fill(b.rows.positions.data(), T, local_host.data());
    const kernels::Floats local_cos_sin = be.upload(local_host);

    kernels::Floats x = be.array<float>(T * H), h = be.array<float>(T * H),
                    delta = be.array<float>(T * H), normed = be.array<float>(T * H);
    be.embedding(embed_, b.device_tokens.data(), T, x.data());
    be.scale(x.data(), T * H, embed_scale_);
    // `normed` holds the last block's normed output until the next norm adds it to x
    // (add_rms_norm: the same bits as add then rms_norm).
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const Gemma3Layer& L = layers_[l];
      if (l == 0) be.rms_norm(x.data(), T, H, L.input_norm.data(), eps, true, h.data());
      else be.add_rms_norm(x.data(), normed.data(), T, H, L.input_norm.data(), eps, true, h.data());
      AttentionOptions opt;
      opt.window = L.window;
      opt.cos_sin = L.window > 0 ? local_cos_sin.data() : nullptr;
      opt.scale = attn_scale_;
      attention_forward(L.attn, c, h.data(), T, b.rows, kv_, l, delta.data(), be, opt);
      be.rms_norm(delta.data(), T, H, L.post_attention_norm.data(), eps, true, normed.data());
      be.add_rms_norm(x.data(), normed.data(), T, H, L.pre_feedforward_norm.data(), eps, true,
                      h.data());
      mlp_forward(L.mlp, h.data(), T, delta.data(), be);
      be.rms_norm(delta.data(), T, H, L.post_feedforward_norm.data(), eps, true, normed.data());
    }
    if (c.num_hidden_layers > 0) be.add(x.data(), normed.data(), T * H);
    const OutputHead head{&final_norm_, lm_head_, eps, true,
                          static_cast<float>(c.final_logit_softcapping)};
    return finish_forward(items, b, x.data(), H, head, be);
  }

 private:
  kernels::RopeTable rope_global_, rope_local_;
  kernels::Weight embed_, lm_head_;
  float embed_scale_ = 1.0f, attn_scale_ = 1.0f;
  std::vector<Gemma3Layer> layers_;
  kernels::Floats final_norm_;
};

}  // namespace

std::unique_ptr<Model> load_gemma3_model(const ModelConfig& config, const std::string& dir,
                                         const ModelOptions& options) {
  return std::make_unique<Gemma3Model>(config, dir, options);
}

}  // namespace lockstep
