#include "models/mtp_head.h"

#include "core/error.h"
#include "models/attention_layer.h"
#include "models/forward_common.h"
#include "models/moe_layer.h"
#include "models/weights.h"

namespace lockstep {

namespace {

class MtpHead final : public MtpDrafter {
 public:
  MtpHead(const Checkpoint& w, const MtpShared& s, const ModelOptions& o)
      : s_(s),
        kv_(1, s.config->num_key_value_heads, s.config->head_dim, o.kv_block_tokens,
            o.kv_capacity_tokens, s.backend) {
    const ModelConfig& c = *s.config;
    kernels::Backend& be = *s.backend;
    const int64_t H = c.hidden_size;
    if (c.mtp_num_hidden_layers != 1)
      fail(c.source, ": MTP heads with ", c.mtp_num_hidden_layers,
           " layers are not supported (expected 1)");
    norm_embedding_ = be.upload(vector_f32(w, "mtp.pre_fc_norm_embedding.weight", H));
    norm_hidden_ = be.upload(vector_f32(w, "mtp.pre_fc_norm_hidden.weight", H));
    fc_ = be.place(matrix(w, "mtp.fc.weight", H, 2 * H));
    input_norm_ = be.upload(vector_f32(w, "mtp.layers.0.input_layernorm.weight", H));
    post_attention_norm_ =
        be.upload(vector_f32(w, "mtp.layers.0.post_attention_layernorm.weight", H));
    attn_ = load_attention(w, c, "mtp.layers.0.self_attn.", be);
    // The head's MLP is routed when the checkpoint says so (Qwen3.5-MoE: a router beside experts).
    mlp_ = load_feed_forward(w, c, "mtp.layers.0.mlp.",
                             c.num_experts > 0 && w.has("mtp.layers.0.mlp.gate.weight"), be);
    final_norm_ = be.upload(vector_f32(w, "mtp.norm.weight", H));
  }

  std::unique_ptr<SequenceState> new_draft_sequence() override {
    return std::make_unique<SequenceState>(&kv_);
  }

  void truncate(SequenceState& seq, int64_t length) override { truncate_kv(kv_, seq, length); }

  ForwardResult draft(std::span<const DraftItem> items) override {
    const ModelConfig& c = *s_.config;
    const int64_t H = c.hidden_size;
    const float eps = static_cast<float>(c.rms_norm_eps);
    std::vector<ForwardItem> fwd;
    for (const DraftItem& d : items) {
      if (static_cast<int64_t>(d.hidden.size()) != static_cast<int64_t>(d.tokens.size()) * H)
        fail("mtp draft: hidden has ", d.hidden.size(), " floats for ", d.tokens.size(),
             " tokens of hidden size ", H);
      fwd.push_back({d.seq, d.tokens, ForwardItem::Logits::All});
      fwd.back().choose = d.choose;  // hidden: always (chained drafts read it back)
    }
    kernels::Backend& be = *s_.backend;
    FlatBatch b = flatten_batch(fwd, kv_, *s_.rope, c.max_position_embeddings, c.vocab_size, be);
    const int64_t T = static_cast<int64_t>(b.tokens.size());
    kernels::Floats e = be.array<float>(T * H), g = be.array<float>(T * H),
                    cat = be.array<float>(T * 2 * H), x = be.array<float>(T * H),
                    h = be.array<float>(T * H), delta = be.array<float>(T * H);
    be.embedding(s_.embed, b.device_tokens.data(), T, e.data());
    for (size_t i = 0; i < items.size(); ++i)
      be.upload(g.data() + b.item_first[i] * H, items[i].hidden.data(),
                items[i].hidden.size() * sizeof(float));
    be.rms_norm(e.data(), T, H, norm_embedding_.data(), eps, c.zero_centered_norm, e.data());
    be.rms_norm(g.data(), T, H, norm_hidden_.data(), eps, c.zero_centered_norm, g.data());
    be.copy_2d(cat.data(), 2 * H, e.data(), H, T, H);  // [e | g] per row
    be.copy_2d(cat.data() + H, 2 * H, g.data(), H, T, H);
    be.linear(cat.data(), T, fc_, nullptr, x.data());

    be.rms_norm(x.data(), T, H, input_norm_.data(), eps, c.zero_centered_norm, h.data());
    attention_forward(attn_, c, h.data(), T, b.rows, kv_, 0, delta.data(), be);
    be.add_rms_norm(x.data(), delta.data(), T, H, post_attention_norm_.data(), eps,
                    c.zero_centered_norm, h.data());
    feed_forward(mlp_, h.data(), T, delta.data(), be);
    be.add(x.data(), delta.data(), T * H);
    return finish_forward(fwd, b, x.data(), H,
                          {&final_norm_, s_.lm_head, eps, c.zero_centered_norm}, be);
  }

 private:
  MtpShared s_;
  KvPool kv_;
  kernels::Floats norm_embedding_, norm_hidden_, input_norm_, post_attention_norm_, final_norm_;
  kernels::Weight fc_;
  AttentionWeights attn_;
  FeedForward mlp_;
};

}  // namespace

std::unique_ptr<MtpDrafter> load_mtp_head(const Checkpoint& ckpt, const MtpShared& shared,
                                          const ModelOptions& options) {
  if (shared.config->mtp_num_hidden_layers <= 0 || !ckpt.has("mtp.fc.weight")) return nullptr;
  return std::make_unique<MtpHead>(ckpt, shared, options);
}

}  // namespace lockstep
