// Model configuration: plain data read from a Hugging Face checkpoint's config.json (and
// generation_config.json for eos/bos). Unknown model types and missing or ill-typed fields are
// errors naming the file and field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep {

struct RopeScaling {
  std::string type = "default";  // "default", "linear", "llama3", "yarn"
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  // yarn
  double beta_fast = 32.0, beta_slow = 1.0;
  double attention_factor = 0.0;  // 0: derived as 0.1 * ln(factor) + 1 (transformers' default)
  bool truncate = true;           // yarn: floor/ceil the correction range (transformers default)
};

enum class LayerKind { FullAttention, LinearAttention };

struct ModelConfig {
  std::string model_type;   // llama | qwen2 | qwen3 | qwen3_moe | qwen3_5_text | qwen3_5_moe_text
                            // | qwen3_next | gemma3_text | gemma4_text
  std::string source;       // path of the config.json it came from
  std::string weight_prefix = "model.";  // "model.language_model." for qwen3_5 (multimodal)

  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0;
  int64_t num_attention_heads = 0, num_key_value_heads = 0, head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6, rope_theta = 10000.0, partial_rotary_factor = 1.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (qwen2 always; llama when attention_bias=true)
  bool mlp_bias = false;
  bool qk_norm = false;         // qwen3, qwen3_5: RMSNorm on q and k per head before RoPE
  std::string torch_dtype = "float32";

  // Hybrid (Qwen3.5 / Qwen3-Next): per-layer kinds; empty means all FullAttention.
  std::vector<LayerKind> layer_types;
  int64_t linear_num_key_heads = 0, linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0, linear_value_head_dim = 0, linear_conv_kernel_dim = 4;
  bool attn_output_gate = false;       // gated full attention
  bool zero_centered_norm = false;     // RMSNorm computes x * (1 + w)
  int64_t mtp_num_hidden_layers = 0;   // MTP head layers present in config

  // Mixture of experts (qwen3_moe, qwen3_5_moe_text, qwen3_next); num_experts 0: every layer
  // dense. A layer is sparse unless listed in mlp_only_layers, and only every
  // decoder_sparse_step-th layer is (layer_is_moe). Each routed expert is a SwiGLU MLP of
  // moe_intermediate_size; a shared expert (shared_expert_intermediate_size > 0) runs beside the
  // routed ones, scaled by sigmoid(shared_expert_gate(x)).
  int64_t num_experts = 0, num_experts_per_tok = 0, moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  bool norm_topk_prob = false;  // renormalise the k routing weights to sum to 1
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;

  // Gemma 3 (gemma3_text; gemma3 wraps it). Sliding layers attend to the last sliding_window
  // positions (the query's own included) and rotate with their own RoPE base and scaling; every
  // layer has q/k norm and four zero-centred norms (models/gemma3.cpp).
  std::vector<bool> sliding_layers;       // per layer: sliding_attention; empty: none
  int64_t sliding_window = 0;
  double rope_local_theta = 10000.0;      // RoPE of sliding layers (rope_theta: the others)
  RopeScaling rope_local_scaling;
  double query_pre_attn_scalar = 0;       // > 0: scores scaled by its ^-0.5, not head_dim^-0.5
  double final_logit_softcapping = 0;     // > 0: logits = cap * tanh(logits / cap)
  std::string hidden_activation = "silu"; // the MLP's: "silu" or "gelu_pytorch_tanh"

  // Per-layer attention shapes (Gemma 4's full layers have their own head_dim and KV heads);
  // empty: every layer has head_dim and num_key_value_heads.
  std::vector<int64_t> layer_head_dims, layer_kv_heads;

  // Gemma 4 (gemma4_text; gemma4 wraps it): models/gemma4.cpp. Norms are plain (x_normed * w),
  // values get a weightless RMSNorm, scores are not scaled, and each layer's output is scaled by
  // its layer_scalar.
  struct Gemma4 {
    // Full layers' values are their keys before k_norm (attention_k_eq_v).
    bool k_eq_v = false;
    // The last kv_shared_layers layers compute no keys or values: each attends to the cache of
    // the last earlier layer of its type (kv_source).
    int64_t kv_shared_layers = 0;
    std::vector<int64_t> kv_source;  // per layer: the layer whose cache it reads (itself if own)
    // Per-layer inputs (hidden_size_per_layer_input > 0; the E2B/E4B models).
    int64_t per_layer_input_size = 0, per_layer_vocab = 0;
    bool moe_block = false;          // experts beside the dense MLP (num_experts, ...)
    bool double_wide_mlp = false;    // KV-sharing layers' MLP is 2 * intermediate_size wide
    // RoPE of each layer type: "default" rotates the whole head with inv_freq over head_dim;
    // "proportional" rotates the first partial_rotary_factor of each half and leaves the rest.
    struct Rope {
      std::string type = "default";
      double theta = 10000.0, partial_rotary_factor = 1.0, factor = 1.0;
    };
    Rope full_rope, sliding_rope;
  } gemma4;

  // MLX "quantization": {"group_size", "bits"} (0: not quantized). Which tensors are quantized,
  // and at what width, is read from each tensor's own .scales (layers may be overridden).
  int64_t quant_bits = 0, quant_group_size = 0;

  std::vector<int32_t> eos_token_ids;  // config.json, overridden by generation_config.json
  int32_t bos_token_id = -1;

  int64_t rotary_dim() const;          // head_dim * partial_rotary_factor, even
  LayerKind layer_kind(int64_t layer) const;
  bool layer_is_moe(int64_t layer) const;
  bool has_moe() const;  // some layer routes to experts
  // Keys and values (elements, K and V together) the cache holds per position over all layers:
  // full-attention layers with a cache of their own (Gemma 4's KV-sharing layers have none).
  int64_t kv_elements_per_token() const;
  // Attention shape of a layer (layer_head_dims / layer_kv_heads, else the uniform fields).
  int64_t head_dim_of(int64_t layer) const;
  int64_t kv_heads_of(int64_t layer) const;
  // Keys a query of this layer sees: sliding_window for a sliding layer, 0 (all) otherwise.
  int64_t attention_window(int64_t layer) const;
};

// Reads <dir>/config.json (+ generation_config.json when present).
ModelConfig load_model_config(const std::string& dir);
// Parses config JSON text; `source` names it in errors.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);

}  // namespace lockstep
