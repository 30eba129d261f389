// make-random: preset configs (shapes of the released Hugging Face models) and streaming writing
// of random weights.
#include "models/random_checkpoint.h"

#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "models/checkpoint_layout.h"
#include "models/config.h"
#include "models/gemma4_assistant_config.h"

namespace lockstep {

namespace {

using json = nlohmann::json;

struct Dense {
  const char* model_type;
  const char* architecture;
  int64_t vocab, hidden, intermediate, layers, heads, kv_heads, head_dim, max_pos;
  double theta, eps;
  bool tied;
  int64_t bos, eos;
};

json dense_config(const Dense& d) {
  return {{"architectures", {d.architecture}},
          {"model_type", d.model_type},
          {"vocab_size", d.vocab},
          {"hidden_size", d.hidden},
          {"intermediate_size", d.intermediate},
          {"num_hidden_layers", d.layers},
          {"num_attention_heads", d.heads},
          {"num_key_value_heads", d.kv_heads},
          {"head_dim", d.head_dim},
          {"max_position_embeddings", d.max_pos},
          {"rope_theta", d.theta},
          {"rope_scaling", nullptr},
          {"rms_norm_eps", d.eps},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"tie_word_embeddings", d.tied},
          {"bos_token_id", d.bos},
          {"eos_token_id", d.eos}};
}

// A Llama 3 config: llama3 RoPE scaling by `factor` (low / high frequency factors 1 / 4 over an
// original 8192 positions, as Meta publishes them), no MLP bias.
json llama3_config(const Dense& d, double factor) {
  json c = dense_config(d);
  c["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", factor},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  c["mlp_bias"] = false;
  return c;
}

struct Hybrid {
  int64_t vocab, hidden, intermediate, layers, heads, kv_heads, head_dim, max_pos;
  int64_t lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, interval;
  double theta;
  int64_t eos;
};

// Qwen3.5 text config, flat (model_type qwen3_5_text, weights under "model.").
json hybrid_config(const Hybrid& h) {
  json layer_types = json::array();
  for (int64_t i = 0; i < h.layers; ++i)
    layer_types.push_back((i + 1) % h.interval == 0 ? "full_attention" : "linear_attention");
  return {{"architectures", {"Qwen3_5ForCausalLM"}},
          {"model_type", "qwen3_5_text"},
          {"vocab_size", h.vocab},
          {"hidden_size", h.hidden},
          {"intermediate_size", h.intermediate},
          {"num_hidden_layers", h.layers},
          {"num_attention_heads", h.heads},
          {"num_key_value_heads", h.kv_heads},
          {"head_dim", h.head_dim},
          {"max_position_embeddings", h.max_pos},
          {"rms_norm_eps", 1e-6},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"attn_output_gate", true},
          {"tie_word_embeddings", true},
          {"full_attention_interval", h.interval},
          {"layer_types", layer_types},
          {"linear_conv_kernel_dim", 4},
          {"linear_num_key_heads", h.lin_k_heads},
          {"linear_num_value_heads", h.lin_v_heads},
          {"linear_key_head_dim", h.lin_k_dim},
          {"linear_value_head_dim", h.lin_v_dim},
          {"mtp_num_hidden_layers", 1},
          {"rope_parameters",
           {{"rope_type", "default"},
            {"rope_theta", h.theta},
            {"partial_rotary_factor", 0.25},
            {"mrope_section", {11, 11, 10}},
            {"mrope_interleaved", true}}},
          {"eos_token_id", h.eos}};
}

// Routed experts on top of a dense or hybrid config (shared: the shared expert's width, 0: none).
json with_experts(json c, int64_t experts, int64_t top_k, int64_t moe_intermediate,
                  int64_t shared, bool norm_topk) {
  c["num_experts"] = experts;
  c["num_experts_per_tok"] = top_k;
  c["moe_intermediate_size"] = moe_intermediate;
  c["norm_topk_prob"] = norm_topk;
  c["decoder_sparse_step"] = 1;
  c["mlp_only_layers"] = json::array();
  if (shared > 0) c["shared_expert_intermediate_size"] = shared;
  return c;
}

// Qwen3.5-MoE text config: the hybrid with every MLP routed and no dense intermediate size.
json hybrid_moe_config(const Hybrid& h, int64_t experts, int64_t top_k, int64_t moe_intermediate,
                       int64_t shared) {
  json c = with_experts(hybrid_config(h), experts, top_k, moe_intermediate, shared, true);
  c["architectures"] = {"Qwen3_5MoeForCausalLM"};
  c["model_type"] = "qwen3_5_moe_text";
  c.erase("intermediate_size");
  c.erase("decoder_sparse_step");
  c.erase("mlp_only_layers");
  c.erase("norm_topk_prob");  // Qwen3.5-MoE always renormalises
  return c;
}

// Qwen3-Next: the hybrid layout with fused projections, routed experts and a shared expert.
json next_config(const Hybrid& h, int64_t experts, int64_t top_k, int64_t moe_intermediate,
                 int64_t shared) {
  json c = with_experts(hybrid_config(h), experts, top_k, moe_intermediate, shared, true);
  c["architectures"] = {"Qwen3NextForCausalLM"};
  c["model_type"] = "qwen3_next";
  c["mtp_num_hidden_layers"] = 0;  // lockstep reads Qwen3-Next's mtp.* only from real checkpoints
  c["tie_word_embeddings"] = false;
  return c;
}

struct Gemma3 {
  int64_t vocab, hidden, intermediate, layers, heads, kv_heads, head_dim, max_pos;
  int64_t window, pattern;    // sliding window; every pattern-th layer is global
  double query_pre_attn_scalar;
  double global_linear_factor;  // > 0: linear RoPE scaling on the global layers
};

// Gemma 3 text config (model_type gemma3_text, weights under "model."), with layer_types written
// out as transformers 5 does.
json gemma3_config(const Gemma3& g) {
  json layer_types = json::array();
  for (int64_t i = 0; i < g.layers; ++i)
    layer_types.push_back((i + 1) % g.pattern == 0 ? "full_attention" : "sliding_attention");
  json scaling = nullptr;
  if (g.global_linear_factor > 0)
    scaling = {{"rope_type", "linear"}, {"factor", g.global_linear_factor}};
  return {{"architectures", {"Gemma3ForCausalLM"}},
          {"model_type", "gemma3_text"},
          {"vocab_size", g.vocab},
          {"hidden_size", g.hidden},
          {"intermediate_size", g.intermediate},
          {"num_hidden_layers", g.layers},
          {"num_attention_heads", g.heads},
          {"num_key_value_heads", g.kv_heads},
          {"head_dim", g.head_dim},
          {"max_position_embeddings", g.max_pos},
          {"rms_norm_eps", 1e-6},
          {"hidden_activation", "gelu_pytorch_tanh"},
          {"query_pre_attn_scalar", g.query_pre_attn_scalar},
          {"sliding_window", g.window},
          {"layer_types", layer_types},
          {"rope_theta", 1000000.0},
          {"rope_local_base_freq", 10000.0},
          {"rope_scaling", scaling},
          {"final_logit_softcapping", nullptr},
          {"attn_logit_softcapping", nullptr},
          {"attention_bias", false},
          {"tie_word_embeddings", true},
          {"pad_token_id", 0},
          {"bos_token_id", 2},
          {"eos_token_id", {1, 106}}};
}

struct Gemma4Preset {
  int64_t vocab, hidden, intermediate, layers, heads, kv_heads, head_dim, global_head_dim;
  int64_t global_kv_heads;  // 0: the full layers keep kv_heads (no attention_k_eq_v)
  int64_t window, pattern;  // every pattern-th layer is full
  int64_t kv_shared, per_layer_input, max_pos;
  bool double_wide;
  int64_t experts, top_k, expert_intermediate;  // experts 0: no MoE block
};

// Gemma 4 text config (model_type gemma4_text, weights under "model.") as the published configs
// write it: global_head_dim / num_global_key_value_heads, rope_parameters by layer type.
json gemma4_config(const Gemma4Preset& g) {
  json layer_types = json::array();
  for (int64_t i = 0; i < g.layers; ++i)
    layer_types.push_back((i + 1) % g.pattern == 0 || i + 1 == g.layers ? "full_attention"
                                                                       : "sliding_attention");
  json c = {{"architectures", {"Gemma4ForCausalLM"}},
            {"model_type", "gemma4_text"},
            {"vocab_size", g.vocab},
            {"hidden_size", g.hidden},
            {"intermediate_size", g.intermediate},
            {"num_hidden_layers", g.layers},
            {"num_attention_heads", g.heads},
            {"num_key_value_heads", g.kv_heads},
            {"head_dim", g.head_dim},
            {"global_head_dim", g.global_head_dim},
            {"num_global_key_value_heads", g.global_kv_heads > 0 ? json(g.global_kv_heads) : json()},
            {"attention_k_eq_v", g.global_kv_heads > 0},
            {"max_position_embeddings", g.max_pos},
            {"rms_norm_eps", 1e-6},
            {"hidden_activation", "gelu_pytorch_tanh"},
            {"sliding_window", g.window},
            {"layer_types", layer_types},
            {"rope_parameters",
             {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
              {"full_attention",
               {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25},
                {"rope_theta", 1000000.0}}}}},
            {"final_logit_softcapping", 30.0},
            {"num_kv_shared_layers", g.kv_shared},
            {"use_double_wide_mlp", g.double_wide},
            {"hidden_size_per_layer_input", g.per_layer_input},
            {"vocab_size_per_layer_input", g.per_layer_input > 0 ? g.vocab : 0},
            {"enable_moe_block", g.experts > 0},
            {"attention_bias", false},
            {"tie_word_embeddings", true},
            {"pad_token_id", 0},
            {"bos_token_id", 2},
            {"eos_token_id", {1, 106}}};
  if (g.experts > 0) {
    c["num_experts"] = g.experts;
    c["top_k_experts"] = g.top_k;
    c["moe_intermediate_size"] = g.expert_intermediate;
  }
  return c;
}

// A Gemma 4 assistant drafter for a Gemma 4 preset (model_type gemma4_assistant): its own text
// stack of `g`'s shape (g.kv_shared = layers: every layer reads the target's KV, so head dims, KV
// heads and window must be the target's), projections to and from the target's hidden size.
json gemma4_assistant_config(const Gemma4Preset& g, int64_t backbone_hidden) {
  json text = gemma4_config(g);
  text.erase("architectures");
  text.erase("final_logit_softcapping");  // the assistant's forward applies none
  return {{"architectures", {"Gemma4AssistantForCausalLM"}},
          {"model_type", "gemma4_assistant"},
          {"backbone_hidden_size", backbone_hidden},
          {"use_ordered_embeddings", false},
          {"num_centroids", 2048},
          {"centroid_intermediate_top_k", 32},
          {"tie_word_embeddings", true},
          {"text_config", text}};
}

json preset(const std::string& like) {
  if (like == "qwen3-0.6b")
    return dense_config({"qwen3", "Qwen3ForCausalLM", 151936, 1024, 3072, 28, 16, 8, 128, 40960,
                         1e6, 1e-6, true, 151643, 151645});
  if (like == "qwen3-1.7b")
    return dense_config({"qwen3", "Qwen3ForCausalLM", 151936, 2048, 6144, 28, 16, 8, 128, 40960,
                         1e6, 1e-6, true, 151643, 151645});
  if (like == "qwen3-8b")
    return dense_config({"qwen3", "Qwen3ForCausalLM", 151936, 4096, 12288, 36, 32, 8, 128, 40960,
                         1e6, 1e-6, false, 151643, 151645});
  if (like == "qwen3-32b")
    return dense_config({"qwen3", "Qwen3ForCausalLM", 151936, 5120, 25600, 64, 64, 8, 128, 40960,
                         1e6, 1e-6, false, 151643, 151645});
  if (like == "llama-3.1-70b")
    return llama3_config({"llama", "LlamaForCausalLM", 128256, 8192, 28672, 80, 64, 8, 128, 131072,
                          500000.0, 1e-5, false, 128000, 128001},
                         8.0);
  if (like == "llama-3.2-1b")
    return llama3_config({"llama", "LlamaForCausalLM", 128256, 2048, 8192, 16, 32, 8, 64, 131072,
                          500000.0, 1e-5, true, 128000, 128001},
                         32.0);
  if (like == "qwen3.5-0.8b")
    return hybrid_config({248320, 1024, 3584, 24, 8, 2, 256, 262144, 16, 16, 128, 128, 4, 1e7,
                          248044});
  // Mixture of experts (shapes of the released checkpoints; --layers makes fewer of them).
  if (like == "qwen3-30b-a3b") {
    json c = with_experts(dense_config({"qwen3_moe", "Qwen3MoeForCausalLM", 151936, 2048, 6144,
                                        48, 32, 4, 128, 40960, 1e6, 1e-6, false, 151643, 151645}),
                          128, 8, 768, 0, true);
    return c;
  }
  if (like == "qwen3.5-35b-a3b") {
    json c = hybrid_moe_config({248320, 2048, 0, 40, 16, 2, 256, 262144, 16, 32, 128, 128, 4, 1e7,
                                248044},
                               256, 8, 512, 512);
    c["tie_word_embeddings"] = false;
    return c;
  }
  if (like == "qwen3-next-80b-a3b")
    return next_config({151936, 2048, 5120, 48, 16, 2, 256, 262144, 16, 32, 128, 128, 4, 1e7,
                        151645},
                       512, 10, 512, 512);
  // Gemma 3 text models (the 4B and 27B are published wrapped as gemma3; these are their
  // language models).
  if (like == "gemma-3-1b")
    return gemma3_config({262144, 1152, 6912, 26, 4, 1, 256, 32768, 512, 6, 256, 0});
  if (like == "gemma-3-4b")
    return gemma3_config({262208, 2560, 10240, 34, 8, 4, 256, 131072, 1024, 6, 256, 8.0});
  if (like == "gemma-3-27b")
    return gemma3_config({262208, 5376, 21504, 62, 32, 16, 128, 131072, 1024, 6, 168, 8.0});
  // Gemma 4 text models (published wrapped as gemma4 with vision and audio towers; these are
  // their language models, shapes from transformers' Gemma 4 conversion script).
  if (like == "gemma-4-e2b")
    return gemma4_config({262144, 1536, 6144, 35, 8, 1, 256, 512, 0, 512, 5, 20, 256, 131072,
                          true, 0, 0, 0});
  if (like == "gemma-4-e4b")
    return gemma4_config({262144, 2560, 10240, 42, 8, 2, 256, 512, 0, 512, 6, 18, 256, 131072,
                          false, 0, 0, 0});
  if (like == "gemma-4-31b")
    return gemma4_config({262144, 5376, 21504, 60, 32, 16, 256, 512, 4, 1024, 6, 0, 0, 262144,
                          false, 0, 0, 0});
  if (like == "gemma-4-26b-a4b")
    return gemma4_config({262144, 2816, 2112, 30, 16, 8, 256, 512, 2, 1024, 6, 0, 0, 262144,
                          false, 128, 8, 704});
  // Test presets: tiny, but every feature of the family switched on.
  if (like == "tiny-llama") {
    json c = dense_config({"llama", "LlamaForCausalLM", 512, 64, 128, 2, 4, 2, 16, 2048, 10000.0,
                           1e-5, false, 1, 2});
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 8.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 256}};
    return c;
  }
  if (like == "mistral-7b-v0.3") {  // the llama architecture; v0.3 has no sliding window
    json c = dense_config({"mistral", "MistralForCausalLM", 32768, 4096, 14336, 32, 32, 8, 128,
                           32768, 1e6, 1e-5, false, 1, 2});
    c["sliding_window"] = nullptr;
    return c;
  }
  if (like == "tiny-mistral") {  // a sliding window of 8, head_dim 32 (hidden / heads = 16)
    json c = dense_config({"mistral", "MistralForCausalLM", 512, 64, 128, 2, 4, 2, 32, 4096, 1e6,
                           1e-5, false, 1, 2});
    c["sliding_window"] = 8;
    return c;
  }
  if (like == "tiny-qwen3")  // head_dim 32 differs from hidden / heads = 16 on purpose
    return dense_config({"qwen3", "Qwen3ForCausalLM", 512, 64, 128, 2, 4, 2, 32, 4096, 1e6, 1e-6,
                         true, 1, 2});
  if (like == "tiny-qwen3.5")  // more value heads than key heads, as in the larger Qwen3.5s
    return hybrid_config({512, 64, 128, 4, 4, 2, 32, 4096, 2, 4, 16, 16, 4, 1e7, 2});
  if (like == "tiny-qwen3-moe") {  // layer 1 dense, so both feed-forward kinds run
    json c = with_experts(dense_config({"qwen3_moe", "Qwen3MoeForCausalLM", 512, 64, 128, 3, 4, 2,
                                        32, 4096, 1e6, 1e-6, false, 1, 2}),
                          8, 3, 32, 0, true);
    c["mlp_only_layers"] = {1};
    return c;
  }
  if (like == "tiny-qwen3.5-moe")  // with the MTP head, whose MLP routes too
    return hybrid_moe_config({512, 64, 0, 4, 4, 2, 32, 4096, 2, 4, 16, 16, 4, 1e7, 2}, 8, 2, 32,
                             48);
  if (like == "tiny-gemma3") {  // window 8, so short prompts cross it; scale != head_dim^-0.5
    json c = gemma3_config({512, 64, 128, 4, 4, 2, 32, 4096, 8, 3, 24, 2.0});
    c["final_logit_softcapping"] = 30.0;
    c["eos_token_id"] = 2;
    c["bos_token_id"] = 1;
    return c;
  }
  if (like == "tiny-gemma3-vocab")  // Gemma 3's real vocabulary, for chat with its tokenizer
    return gemma3_config({262144, 64, 128, 2, 2, 1, 32, 32768, 8, 2, 32, 0});
  // Window 8; full layers with head dim 64 and values = keys; the last two layers share KV and
  // are double-wide; per-layer inputs of 16.
  if (like == "tiny-gemma4") {
    json c = gemma4_config({512, 64, 128, 6, 4, 2, 32, 64, 1, 8, 3, 2, 16, 4096, true, 0, 0, 0});
    c["eos_token_id"] = 2;
    c["bos_token_id"] = 1;
    return c;
  }
  if (like == "tiny-gemma4-moe") {  // the MoE block beside the MLP: 8 experts, top 2
    json c = gemma4_config({512, 64, 96, 4, 4, 2, 32, 64, 1, 8, 2, 0, 0, 4096, false, 8, 2, 32});
    c["eos_token_id"] = 2;
    c["bos_token_id"] = 1;
    return c;
  }
  // The sliding-window presets at shapes the CUDA kernels take (head_dim 64/128, every width a
  // multiple of 16): the GPU gates of the windowed families.
  if (like == "small-gemma3") {
    json c = gemma3_config({512, 256, 512, 4, 4, 2, 64, 4096, 16, 3, 64, 2.0});
    c["final_logit_softcapping"] = 30.0;
    c["eos_token_id"] = 2;
    c["bos_token_id"] = 1;
    return c;
  }
  if (like == "small-gemma4" || like == "small-gemma4-moe") {
    json c = like == "small-gemma4"
                 ? gemma4_config({512, 256, 512, 6, 4, 2, 64, 128, 1, 16, 3, 2, 64, 4096, true, 0,
                                  0, 0})
                 : gemma4_config({512, 256, 384, 4, 4, 2, 64, 128, 1, 16, 2, 0, 0, 4096, false,
                                  8, 2, 128});
    c["eos_token_id"] = 2;
    c["bos_token_id"] = 1;
    return c;
  }
  // Assistants for tiny-gemma4 and small-gemma4: 4 layers [S, S, S, F] at half the target's
  // width, reading its sliding (layer 3) and full (layer 2) caches.
  if (like == "tiny-gemma4-assistant")
    return gemma4_assistant_config(
        {512, 32, 64, 4, 4, 2, 32, 64, 1, 8, 4, 4, 0, 4096, false, 0, 0, 0}, 64);
  if (like == "small-gemma4-assistant")
    return gemma4_assistant_config(
        {512, 128, 256, 4, 4, 2, 64, 128, 1, 16, 4, 4, 0, 4096, false, 0, 0, 0}, 256);
  // The published Gemma 4 geometry at a small size: sliding layers of head dim 256, full layers
  // of 512 with values = keys, window 300 (crossing the 256-position attention chunks), the last
  // two layers sharing KV, per-layer inputs of 64: the GPU gate of head dim 512.
  if (like == "small-gemma4-hd512") {
    json c = gemma4_config({512, 256, 512, 6, 4, 2, 256, 512, 1, 300, 3, 2, 64, 4096, true, 0,
                            0, 0});
    c["eos_token_id"] = 2;
    c["bos_token_id"] = 1;
    return c;
  }
  if (like == "small-mistral") {
    json c = dense_config({"mistral", "MistralForCausalLM", 512, 256, 512, 2, 4, 2, 64, 4096, 1e6,
                           1e-5, false, 1, 2});
    c["sliding_window"] = 16;
    return c;
  }
  std::string names;
  for (const auto& n : random_checkpoint_presets()) names += (names.empty() ? "" : ", ") + n;
  fail("--like: unknown preset \"", like, "\" (expected one of ", names, ")");
}

const char* torch_dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    default: fail("make-random: dtype ", dtype_name(d), " not supported (use bf16, f16 or f32)");
  }
}

// SplitMix64 finaliser: a bijective mixer, so (key + index) gives independent-looking streams.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t name_key(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return mix(seed ^ mix(h));
}

// One random value for element `i` of a tensor. Normal-ish draws sum four 16-bit uniforms
// (Irwin-Hall), cheap enough for billions of elements and bounded, so no outliers.
float draw(TensorRole role, uint64_t key, uint64_t i, int64_t conv_kernel) {
  const uint64_t r = mix(key + i);
  auto normalish = [r] {
    float s = 0.f;
    for (int k = 0; k < 4; ++k) s += static_cast<float>((r >> (16 * k)) & 0xffff) / 65536.f;
    return (s - 2.f) * 1.7320508f;  // mean 0, variance 1
  };
  const float u = static_cast<float>(r >> 40) / 16777216.f;  // [0, 1)
  switch (role) {
    case TensorRole::Weight:
    case TensorRole::Bias: return 0.02f * normalish();
    case TensorRole::NormOne: return 1.f + 0.02f * normalish();
    case TensorRole::NormZero: return 0.02f * normalish();
    case TensorRole::Conv: return (2.f * u - 1.f) / std::sqrt(static_cast<float>(conv_kernel));
    case TensorRole::ALog: return std::log(1.f + 15.f * u);
    case TensorRole::DtBias: return 1.f + 0.02f * normalish();
  }
  return 0.f;
}

void encode(DType d, float v, uint8_t* out) {
  if (d == DType::F32) {
    std::memcpy(out, &v, 4);
  } else {
    uint16_t h = d == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
    std::memcpy(out, &h, 2);
  }
}

}  // namespace

std::vector<std::string> random_checkpoint_presets() {
  return {"qwen3-0.6b",      "qwen3-1.7b",         "qwen3-8b",   "qwen3-32b", "llama-3.2-1b",
          "llama-3.1-70b",
          "qwen3.5-0.8b",    "qwen3-30b-a3b",      "qwen3.5-35b-a3b",
          "qwen3-next-80b-a3b", "tiny-llama",      "tiny-qwen3", "tiny-qwen3.5",
          "tiny-qwen3-moe",  "tiny-qwen3.5-moe", "gemma-3-1b", "gemma-3-4b",
          "gemma-3-27b",     "tiny-gemma3",        "tiny-gemma3-vocab", "gemma-4-e2b",
          "gemma-4-e4b",     "gemma-4-31b",        "gemma-4-26b-a4b", "tiny-gemma4",
          "tiny-gemma4-moe", "mistral-7b-v0.3",    "tiny-mistral",    "small-gemma3",
          "small-gemma4",    "small-gemma4-moe",   "small-gemma4-hd512", "small-mistral",
          "tiny-gemma4-assistant", "small-gemma4-assistant"};
}

std::string preset_config_json(const std::string& like, DType dtype, int64_t layers) {
  json c = preset(like);
  c["torch_dtype"] = torch_dtype_name(dtype);
  if (layers > 0 && c.value("model_type", "") == "gemma4_assistant")
    fail("--layers: ", like, " is an assistant drafter; its layers are what its target expects");
  if (layers > 0) {  // the first `layers` of the model; a hybrid keeps its layer pattern
    if (c.contains("layer_types")) {
      const json all = c["layer_types"];
      json kept = json::array();
      for (int64_t i = 0; i < layers; ++i) kept.push_back(all[i % all.size()]);
      c["layer_types"] = kept;
    }
    if (c.contains("mlp_only_layers")) {
      json kept = json::array();
      for (const json& l : c["mlp_only_layers"])
        if (l.get<int64_t>() < layers) kept.push_back(l);
      c["mlp_only_layers"] = kept;
    }
    c["num_hidden_layers"] = layers;
    // Gemma 4: the last layer stays full; fewer layers than KV-sharing ones share none.
    if (c.value("model_type", "") == "gemma4_text") {
      c["layer_types"][layers - 1] = "full_attention";
      if (c.value("num_kv_shared_layers", 0) >= layers) c["num_kv_shared_layers"] = 0;
    }
  }
  return c.dump(2) + "\n";
}

RandomCheckpointSummary make_random_checkpoint(const RandomCheckpointOptions& o) {
  namespace fs = std::filesystem;
  const std::string config_text = preset_config_json(o.like, o.dtype, o.layers);
  const fs::path dir(o.out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(o.out_dir, ": cannot create directory: ", ec.message());
  // A stale index would shadow the single file we write; refuse rather than delete user files.
  if (fs::exists(dir / "model.safetensors.index.json"))
    fail(o.out_dir, ": holds model.safetensors.index.json (a sharded checkpoint); choose an empty "
         "directory");
  {
    std::ofstream out(dir / "config.json");
    out << config_text;
    if (!out) fail((dir / "config.json").string(), ": write failed");
  }
  const std::string config_path = (dir / "config.json").string();
  const bool assistant = json::parse(config_text).value("model_type", "") == "gemma4_assistant";
  const ModelConfig cfg = assistant ? parse_gemma4_assistant_config(config_text, config_path).text
                                    : parse_model_config(config_text, config_path);
  const std::vector<LayoutTensor> layout =
      assistant ? gemma4_assistant_layout(parse_gemma4_assistant_config(config_text, config_path),
                                          o.dtype)
                : checkpoint_layout(cfg, o.dtype);

  std::vector<TensorHeader> headers;
  RandomCheckpointSummary sum;
  for (const auto& t : layout) {
    headers.push_back(t.header);
    int64_t n = 1;
    for (int64_t d : t.header.shape) n *= d;
    sum.parameters += n;
    sum.bytes += static_cast<size_t>(n) * dtype_size(o.dtype);
  }
  sum.tensors = layout.size();

  const std::string path = (dir / "model.safetensors").string();
  SafetensorsWriter writer(path, headers, {{"format", "pt"}, {"lockstep_make_random", o.like}});
  ThreadPool pool(o.threads);
  const size_t esize = dtype_size(o.dtype);
  constexpr int64_t kChunk = 1 << 22;  // elements per write: bounded memory for any model size
  std::vector<uint8_t> buf(static_cast<size_t>(kChunk) * esize);
  const bool show = o.progress && sum.bytes >= (size_t{256} << 20);
  const auto start = std::chrono::steady_clock::now();
  size_t done = 0;
  int next_pct = 10;
  for (const auto& t : layout) {
    const uint64_t key = name_key(o.seed, t.header.name);
    int64_t n = 1;
    for (int64_t d : t.header.shape) n *= d;
    for (int64_t base = 0; base < n; base += kChunk) {
      const int64_t len = std::min(kChunk, n - base);
      pool.parallel_for(len, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          encode(o.dtype, draw(t.role, key, static_cast<uint64_t>(base + i),
                               cfg.linear_conv_kernel_dim),
                 buf.data() + static_cast<size_t>(i) * esize);
      }, 4096);
      writer.write(buf.data(), static_cast<size_t>(len) * esize);
      done += static_cast<size_t>(len) * esize;
      if (show && done * 100 >= static_cast<size_t>(next_pct) * sum.bytes) {
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(stderr, "make-random: %3d%%  %.2f / %.2f GB  %.1f s\n",
                     static_cast<int>(done * 100 / sum.bytes), done / 1e9, sum.bytes / 1e9, secs);
        while (next_pct <= static_cast<int>(done * 100 / sum.bytes)) next_pct += 10;
      }
    }
  }
  writer.finish();
  return sum;
}

}  // namespace lockstep
