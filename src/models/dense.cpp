// llama / mistral / qwen2 / qwen3 / qwen3_moe: embed, then per layer x += attn(norm(x)); x += mlp(norm(x)); final norm,
// lm_head. The forward reads top to bottom; every op is a kernel from kernels/ops.h.
#include "models/dense.h"

#include "core/error.h"
#include "models/attention_layer.h"
#include "models/forward_common.h"
#include "models/kv_model.h"
#include "models/moe_layer.h"
#include "models/rope_freqs.h"
#include "models/weights.h"

namespace lockstep {

namespace {

struct DenseLayer {
  kernels::Floats input_norm, post_attention_norm;
  AttentionWeights attn;
  FeedForward mlp;  // dense, or routed experts (qwen3_moe)
  int64_t window = 0;  // > 0: sliding-window attention (mistral)
};


class DenseModel final : public KvModel {
 public:
  DenseModel(const ModelConfig& c, const std::string& dir, const ModelOptions& o)
      : KvModel(c, dir, o, kernels::make_backend(o.device, o.pool), uniform_kv(c)),
        rope_(make_rope_table(c)) {
    const Checkpoint& w = *ckpt_;
    kernels::Backend& be = *be_;
    const std::string& p = c.weight_prefix;
    const int64_t H = c.hidden_size;
    // Tied, the table is the lm_head's weight too; else it is only looked up.
    const bool tied = c.tie_word_embeddings && !w.has("lm_head.weight");
    const kernels::Weight embed = matrix(w, p + "embed_tokens.weight", c.vocab_size, H);
    embed_ = tied ? be.place_column_parallel(embed) : be.place_table(embed);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string lp = p + "layers." + std::to_string(l) + ".";
      DenseLayer layer;
      layer.input_norm = be.upload(vector_f32(w, lp + "input_layernorm.weight", H));
      layer.post_attention_norm =
          be.upload(vector_f32(w, lp + "post_attention_layernorm.weight", H));
      layer.attn = load_attention(w, c, lp + "self_attn.", be);
      layer.mlp = load_feed_forward(w, c, lp + "mlp.", c.layer_is_moe(l), be);
      layer.window = c.attention_window(l);
      layers_.push_back(std::move(layer));
    }
    final_norm_ = be.upload(vector_f32(w, p + "norm.weight", H));
    lm_head_ = tied ? embed_
                     : be.place_column_parallel(matrix(w, "lm_head.weight", c.vocab_size, H));
  }

  ForwardResult forward(std::span<const ForwardItem> items) override {
    const ModelConfig& c = config_;
    const int64_t H = c.hidden_size;
    kernels::Backend& be = *be_;
    // MoE layers that route on the host read router logits back mid-forward, so such a step is
    // never recorded; layers whose experts run on the device (moe_layer.h) read nothing back.
    const int64_t limit = layers_record_limit(layers_, kRecordedMaxTokens);
    const std::string key = limit > 0 ? graph_key("dense", items, c.vocab_size, limit) : "";
    RecordedStep step(be, key);
    FlatBatch b = flatten_batch(items, kv_, rope_, c.max_position_embeddings, c.vocab_size, be,
                                !key.empty());
    const int64_t T = static_cast<int64_t>(b.tokens.size());
    const float eps = static_cast<float>(c.rms_norm_eps);
    kernels::Floats x = be.array<float>(T * H), h = be.array<float>(T * H),
                    delta = be.array<float>(T * H);
    be.embedding(embed_, b.device_tokens.data(), T, x.data());
    // Each residual add is fused with the norm that reads its x (add_rms_norm: the same bits as
    // add then rms_norm); the last layer's MLP residual is a plain add.
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const DenseLayer& L = layers_[l];
      if (l == 0) be.rms_norm(x.data(), T, H, L.input_norm.data(), eps, false, h.data());
      else be.add_rms_norm(x.data(), delta.data(), T, H, L.input_norm.data(), eps, false, h.data());
      attention_forward(L.attn, c, h.data(), T, b.rows, kv_, l, delta.data(), be,
                        {.window = L.window});
      be.add_rms_norm(x.data(), delta.data(), T, H, L.post_attention_norm.data(), eps, false,
                      h.data());
      feed_forward(L.mlp, h.data(), T, delta.data(), be);
    }
    if (c.num_hidden_layers > 0) be.add(x.data(), delta.data(), T * H);
    return finish_forward(items, b, x.data(), H, {&final_norm_, lm_head_, eps, false}, be);
  }

 private:
  kernels::RopeTable rope_;
  kernels::Weight embed_, lm_head_;
  std::vector<DenseLayer> layers_;
  kernels::Floats final_norm_;
};

}  // namespace

std::unique_ptr<Model> load_dense_model(const ModelConfig& config, const std::string& dir,
                                        const ModelOptions& options) {
  return std::make_unique<DenseModel>(config, dir, options);
}

}  // namespace lockstep
