// Tensor names and shapes per architecture, from transformers' modeling files (Llama, Qwen2,
// Qwen3, Qwen3-MoE, Qwen3-Next, Qwen3.5, Qwen3.5-MoE, Gemma 3, Gemma 4). Shapes are [out_features, in_features] for
// linear weights.
#include "models/checkpoint_layout.h"

namespace lockstep {

namespace {

class Layout {
 public:
  Layout(DType dtype, std::vector<LayoutTensor>* out) : dtype_(dtype), out_(out) {}
  void add(const std::string& name, std::vector<int64_t> shape, TensorRole role) {
    out_->push_back({{name, dtype_, std::move(shape)}, role});
  }
  void linear(const std::string& name, int64_t out, int64_t in, bool bias) {
    add(name + ".weight", {out, in}, TensorRole::Weight);
    if (bias) add(name + ".bias", {out}, TensorRole::Bias);
  }

 private:
  DType dtype_;
  std::vector<LayoutTensor>* out_;
};

// Norm role for the decoder's RMSNorms: Qwen3.5 / Qwen3-Next compute x * (1 + w).
TensorRole norm_role(const ModelConfig& c) {
  return c.zero_centered_norm ? TensorRole::NormZero : TensorRole::NormOne;
}

void attention(Layout& l, const ModelConfig& c, const std::string& p) {
  const int64_t h = c.hidden_size, hd = c.head_dim;
  const bool b = c.attention_bias;
  // Gated attention: q_proj yields a query and a gate per head, so twice the rows.
  l.linear(p + "q_proj", c.num_attention_heads * hd * (c.attn_output_gate ? 2 : 1), h, b);
  l.linear(p + "k_proj", c.num_key_value_heads * hd, h, b);
  l.linear(p + "v_proj", c.num_key_value_heads * hd, h, b);
  // Qwen2 has biases on q/k/v only; Llama, Qwen3 and the hybrids put attention_bias on o_proj too.
  l.linear(p + "o_proj", h, c.num_attention_heads * hd, b && c.model_type != "qwen2");
  if (c.qk_norm) {
    l.add(p + "q_norm.weight", {hd}, norm_role(c));
    l.add(p + "k_norm.weight", {hd}, norm_role(c));
  }
}

void gated_deltanet(Layout& l, const ModelConfig& c, const std::string& p) {
  const int64_t h = c.hidden_size;
  const int64_t key_dim = c.linear_num_key_heads * c.linear_key_head_dim;
  const int64_t value_dim = c.linear_num_value_heads * c.linear_value_head_dim;
  const int64_t nv = c.linear_num_value_heads;
  const int64_t conv_dim = 2 * key_dim + value_dim;
  if (c.model_type == "qwen3_next") {
    // Qwen3-Next fuses the projections (rows grouped per key head, see its modeling file).
    l.linear(p + "in_proj_qkvz", 2 * key_dim + 2 * value_dim, h, false);
    l.linear(p + "in_proj_ba", 2 * nv, h, false);
  } else {
    l.linear(p + "in_proj_qkv", conv_dim, h, false);
    l.linear(p + "in_proj_z", value_dim, h, false);
    l.linear(p + "in_proj_b", nv, h, false);
    l.linear(p + "in_proj_a", nv, h, false);
  }
  l.add(p + "conv1d.weight", {conv_dim, 1, c.linear_conv_kernel_dim}, TensorRole::Conv);
  l.add(p + "dt_bias", {nv}, TensorRole::DtBias);
  l.add(p + "A_log", {nv}, TensorRole::ALog);
  // The gated output norm is a plain (not zero-centred) RMSNorm over one value head.
  l.add(p + "norm.weight", {c.linear_value_head_dim}, TensorRole::NormOne);
  l.linear(p + "out_proj", h, value_dim, false);
}

void mlp(Layout& l, const ModelConfig& c, const std::string& p) {
  l.linear(p + "gate_proj", c.intermediate_size, c.hidden_size, c.mlp_bias);
  l.linear(p + "up_proj", c.intermediate_size, c.hidden_size, c.mlp_bias);
  l.linear(p + "down_proj", c.hidden_size, c.intermediate_size, c.mlp_bias);
}

// Routed experts as transformers saves them (one tensor per expert and projection), the router,
// and the shared expert with its gate when the family has one.
void moe(Layout& l, const ModelConfig& c, const std::string& p) {
  const int64_t h = c.hidden_size, i = c.moe_intermediate_size;
  l.linear(p + "gate", c.num_experts, h, false);
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const std::string q = p + "experts." + std::to_string(e) + ".";
    l.linear(q + "gate_proj", i, h, false);
    l.linear(q + "up_proj", i, h, false);
    l.linear(q + "down_proj", h, i, false);
  }
  if (c.shared_expert_intermediate_size > 0) {
    const int64_t s = c.shared_expert_intermediate_size;
    l.linear(p + "shared_expert.gate_proj", s, h, false);
    l.linear(p + "shared_expert.up_proj", s, h, false);
    l.linear(p + "shared_expert.down_proj", h, s, false);
    l.linear(p + "shared_expert_gate", 1, h, false);
  }
}

void decoder_layer(Layout& l, const ModelConfig& c, const std::string& p, LayerKind kind,
                   bool routed) {
  l.add(p + "input_layernorm.weight", {c.hidden_size}, norm_role(c));
  if (kind == LayerKind::FullAttention) attention(l, c, p + "self_attn.");
  else gated_deltanet(l, c, p + "linear_attn.");
  l.add(p + "post_attention_layernorm.weight", {c.hidden_size}, norm_role(c));
  if (c.model_type == "gemma3_text") {  // Gemma's norms around the MLP as well
    l.add(p + "pre_feedforward_layernorm.weight", {c.hidden_size}, norm_role(c));
    l.add(p + "post_feedforward_layernorm.weight", {c.hidden_size}, norm_role(c));
  }
  if (routed) moe(l, c, p + "mlp.");
  else mlp(l, c, p + "mlp.");
}

// A Gemma 4 decoder layer (models/gemma4.cpp): per-layer attention shapes, no k/v for a
// KV-sharing layer and no v_proj where values are keys, fused experts beside the MLP.
void gemma4_layer(Layout& l, const ModelConfig& c, const std::string& p, int64_t layer) {
  const int64_t h = c.hidden_size, hd = c.head_dim_of(layer), kv = c.kv_heads_of(layer);
  const ModelConfig::Gemma4& g = c.gemma4;
  const bool shares = g.kv_source[layer] != layer;
  const bool sliding = c.attention_window(layer) > 0;
  for (const char* n : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                        "post_feedforward_layernorm"})
    l.add(p + n + ".weight", {h}, TensorRole::NormOne);
  l.add(p + "layer_scalar", {1}, TensorRole::NormOne);
  const std::string a = p + "self_attn.";
  l.linear(a + "q_proj", c.num_attention_heads * hd, h, false);
  l.add(a + "q_norm.weight", {hd}, TensorRole::NormOne);
  if (!shares) {
    l.linear(a + "k_proj", kv * hd, h, false);
    if (!(g.k_eq_v && !sliding)) l.linear(a + "v_proj", kv * hd, h, false);
    l.add(a + "k_norm.weight", {hd}, TensorRole::NormOne);
  }
  l.linear(a + "o_proj", h, c.num_attention_heads * hd, false);
  const int64_t i = c.intermediate_size * (g.double_wide_mlp && shares ? 2 : 1);
  l.linear(p + "mlp.gate_proj", i, h, false);
  l.linear(p + "mlp.up_proj", i, h, false);
  l.linear(p + "mlp.down_proj", h, i, false);
  if (g.moe_block) {
    const int64_t e = c.num_experts, ei = c.moe_intermediate_size;
    l.linear(p + "router.proj", e, h, false);
    l.add(p + "router.scale", {h}, TensorRole::NormOne);
    l.add(p + "router.per_expert_scale", {e}, TensorRole::NormOne);
    l.add(p + "experts.gate_up_proj", {e, 2 * ei, h}, TensorRole::Weight);
    l.add(p + "experts.down_proj", {e, h, ei}, TensorRole::Weight);
    for (const char* n : {"post_feedforward_layernorm_1", "pre_feedforward_layernorm_2",
                          "post_feedforward_layernorm_2"})
      l.add(p + n + ".weight", {h}, TensorRole::NormOne);
  }
  if (g.per_layer_input_size > 0) {
    l.linear(p + "per_layer_input_gate", g.per_layer_input_size, h, false);
    l.linear(p + "per_layer_projection", h, g.per_layer_input_size, false);
    l.add(p + "post_per_layer_input_norm.weight", {h}, TensorRole::NormOne);
  }
}

std::vector<LayoutTensor> gemma4_layout(const ModelConfig& c, DType dtype) {
  std::vector<LayoutTensor> out;
  Layout l(dtype, &out);
  const std::string& p = c.weight_prefix;
  const int64_t P = c.gemma4.per_layer_input_size, L = c.num_hidden_layers;
  l.add(p + "embed_tokens.weight", {c.vocab_size, c.hidden_size}, TensorRole::Weight);
  if (P > 0) {
    l.add(p + "embed_tokens_per_layer.weight", {c.gemma4.per_layer_vocab, L * P},
          TensorRole::Weight);
    l.linear(p + "per_layer_model_projection", L * P, c.hidden_size, false);
    l.add(p + "per_layer_projection_norm.weight", {P}, TensorRole::NormOne);
  }
  for (int64_t i = 0; i < L; ++i) gemma4_layer(l, c, p + "layers." + std::to_string(i) + ".", i);
  l.add(p + "norm.weight", {c.hidden_size}, TensorRole::NormOne);
  if (!c.tie_word_embeddings) l.linear("lm_head", c.vocab_size, c.hidden_size, false);
  return out;
}

}  // namespace

std::vector<LayoutTensor> checkpoint_layout(const ModelConfig& c, DType dtype) {
  if (c.model_type == "gemma4_text") return gemma4_layout(c, dtype);
  std::vector<LayoutTensor> out;
  Layout l(dtype, &out);
  const std::string& p = c.weight_prefix;
  l.add(p + "embed_tokens.weight", {c.vocab_size, c.hidden_size}, TensorRole::Weight);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    decoder_layer(l, c, p + "layers." + std::to_string(i) + ".", c.layer_kind(i),
                  c.layer_is_moe(i));
  l.add(p + "norm.weight", {c.hidden_size}, norm_role(c));
  // Gemma 3's published wrapped checkpoints keep lm_head beside their language_model.model.*.
  const std::string lm_head =
      p == "language_model.model." ? "language_model.lm_head" : "lm_head";
  if (!c.tie_word_embeddings) l.linear(lm_head, c.vocab_size, c.hidden_size, false);
  // MTP head: fc over [norm(embed), norm(hidden)], then full-attention decoder layers.
  if (c.mtp_num_hidden_layers > 0) {
    l.add("mtp.pre_fc_norm_embedding.weight", {c.hidden_size}, norm_role(c));
    l.add("mtp.pre_fc_norm_hidden.weight", {c.hidden_size}, norm_role(c));
    l.linear("mtp.fc", c.hidden_size, 2 * c.hidden_size, false);
    for (int64_t i = 0; i < c.mtp_num_hidden_layers; ++i)
      decoder_layer(l, c, "mtp.layers." + std::to_string(i) + ".", LayerKind::FullAttention,
                    c.has_moe());  // an MoE model's MTP layer routes too
    l.add("mtp.norm.weight", {c.hidden_size}, norm_role(c));
  }
  return out;
}

}  // namespace lockstep
