// config.json parsing: every supported model_type, the defaults transformers applies when a key is
// absent, both rope layouts, eos/bos sources, the Qwen3.5 multimodal wrapper, and the errors.
#include "models/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace lockstep {
namespace {

ModelConfig parse(const std::string& text) { return parse_model_config(text, "dir/config.json"); }

// Expects parsing to fail with a message holding every part.
void expect_error(const std::string& text, std::initializer_list<std::string> parts) {
  try {
    parse(text);
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << p << "\"";
    return;
  }
  ADD_FAILURE() << "no error for " << text;
}

const char* kLlama = R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 2048,
  "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
  "num_key_value_heads": 8, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
  "rope_theta": 500000.0, "tie_word_embeddings": true, "bos_token_id": 128000,
  "eos_token_id": 128001, "torch_dtype": "bfloat16",
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"}})";

TEST(ConfigTest, LlamaWithLlama3Scaling) {
  ModelConfig c = parse(kLlama);
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.source, "dir/config.json");
  EXPECT_EQ(c.weight_prefix, "model.");
  EXPECT_EQ(c.head_dim, 64);  // derived: 2048 / 32
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.zero_centered_norm);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001}));
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_TRUE(c.layer_types.empty());
  EXPECT_EQ(c.layer_kind(15), LayerKind::FullAttention);
  EXPECT_THROW(c.layer_kind(16), Error);
}

TEST(ConfigTest, LlamaBiasesAndKvDefault) {
  ModelConfig c = parse(R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 48,
    "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "attention_bias": true, "mlp_bias": true, "head_dim": 16, "eos_token_id": [1, 2]})");
  EXPECT_EQ(c.num_key_value_heads, 4);  // defaults to num_attention_heads
  EXPECT_EQ(c.head_dim, 16);            // explicit, differs from 48 / 4
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(c.bos_token_id, -1);
}

TEST(ConfigTest, Qwen2AlwaysHasAttentionBias) {
  ModelConfig c = parse(R"({"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
    "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
    "num_key_value_heads": 2, "rope_theta": 1000000.0, "tie_word_embeddings": true,
    "rope_scaling": null, "eos_token_id": 151645})");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 32768);
}

TEST(ConfigTest, Qwen3WithYarn) {
  ModelConfig c = parse(R"({"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024,
    "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
    "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}})");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.attention_factor, 0.0);
  EXPECT_TRUE(c.rope_scaling.truncate);
}

TEST(ConfigTest, YarnExplicitFieldsAndDefaults) {
  ModelConfig c = parse(R"({"model_type": "qwen2", "vocab_size": 8, "hidden_size": 8,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
    "max_position_embeddings": 4096,
    "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "beta_fast": 16, "beta_slow": 2,
                     "attention_factor": 1.25, "truncate": false}})");
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);  // falls back
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 2.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.attention_factor, 1.25);
  EXPECT_FALSE(c.rope_scaling.truncate);
}

TEST(ConfigTest, Qwen3HeadDimDefaultsTo128) {
  // Qwen3Config's class default; hidden / heads would be 16 here.
  ModelConfig c = parse(R"({"model_type": "qwen3", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 4})");
  EXPECT_EQ(c.head_dim, 128);
}

TEST(ConfigTest, RopeParametersForm) {
  ModelConfig c = parse(R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 4,
    "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
      "low_freq_factor": 2.0, "high_freq_factor": 8.0, "original_max_position_embeddings": 8192,
      "partial_rotary_factor": 0.5}})");
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 2.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 8.0);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_EQ(c.rotary_dim(), 8);
}

const char* kQwen35Text = R"({"model_type": "qwen3_5_text", "vocab_size": 248320,
  "hidden_size": 1024, "intermediate_size": 3584, "num_hidden_layers": 8,
  "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
  "linear_num_key_heads": 16, "linear_num_value_heads": 16, "linear_key_head_dim": 128,
  "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
  "mtp_num_hidden_layers": 1, "tie_word_embeddings": true, "eos_token_id": 248044,
  "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                      "mrope_section": [11, 11, 10], "mrope_interleaved": true}})";

TEST(ConfigTest, Qwen35TextHybrid) {
  ModelConfig c = parse(kQwen35Text);
  EXPECT_EQ(c.model_type, "qwen3_5_text");
  EXPECT_EQ(c.weight_prefix, "model.");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.zero_centered_norm);
  EXPECT_TRUE(c.attn_output_gate);
  EXPECT_EQ(c.mtp_num_hidden_layers, 1);
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_EQ(c.linear_num_value_heads, 16);
  EXPECT_EQ(c.linear_key_head_dim, 128);
  ASSERT_EQ(c.layer_types.size(), 8u);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(c.layer_kind(i),
              (i + 1) % 4 == 0 ? LayerKind::FullAttention : LayerKind::LinearAttention) << i;
}

TEST(ConfigTest, HybridDefaultsAndExplicitLayerTypes) {
  ModelConfig c = parse(R"({"model_type": "qwen3_next", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 3, "num_attention_heads": 4, "num_experts": 0,
    "attn_output_gate": false,
    "layer_types": ["full_attention", "linear_attention", "full_attention"]})");
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_FALSE(c.attn_output_gate);
  EXPECT_EQ(c.linear_num_value_heads, 32);
  EXPECT_EQ(c.linear_num_key_heads, 16);
  EXPECT_EQ(c.layer_kind(0), LayerKind::FullAttention);
  EXPECT_EQ(c.layer_kind(1), LayerKind::LinearAttention);
  expect_error(R"({"model_type": "qwen3_next", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 2, "num_attention_heads": 4, "num_experts": 0,
    "layer_types": ["full_attention", "sliding"]})", {"dir/config.json", "layer_types", "sliding"});
}

TEST(ConfigTest, Qwen35MultimodalWrapper) {
  std::string text = kQwen35Text;
  ModelConfig c = parse(R"({"model_type": "qwen3_5", "tie_word_embeddings": true,
    "vision_config": {"depth": 12}, "text_config": )" + text + "}");
  EXPECT_EQ(c.model_type, "qwen3_5_text");
  EXPECT_EQ(c.weight_prefix, "model.language_model.");
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{248044}));
  expect_error(R"({"model_type": "qwen3_5", "text_config": {"hidden_size": 8}})",
               {"dir/config.json", "text_config.vocab_size"});
  expect_error(R"({"model_type": "qwen3_5"})", {"text_config"});
}

// Mixture-of-experts families: each family's transformers class defaults when a key is absent.
TEST(ConfigTest, MoeFamiliesAndTheirDefaults) {
  ModelConfig q3 = parse(R"({"model_type": "qwen3_moe", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 4, "num_attention_heads": 4})");
  EXPECT_EQ(q3.num_experts, 128);
  EXPECT_EQ(q3.num_experts_per_tok, 8);
  EXPECT_EQ(q3.moe_intermediate_size, 768);
  EXPECT_EQ(q3.shared_expert_intermediate_size, 0);
  EXPECT_FALSE(q3.norm_topk_prob);
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_EQ(q3.head_dim, 16);  // hidden / heads: Qwen3MoeConfig has no head_dim default
  for (int64_t l = 0; l < 4; ++l) EXPECT_TRUE(q3.layer_is_moe(l));

  // transformers writes the count as num_local_experts; sparse step and dense-only layers.
  ModelConfig stepped = parse(R"({"model_type": "qwen3_moe", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 6, "num_attention_heads": 4,
    "num_local_experts": 6, "num_experts_per_tok": 2, "decoder_sparse_step": 2,
    "mlp_only_layers": [3], "norm_topk_prob": true})");
  EXPECT_EQ(stepped.num_experts, 6);
  EXPECT_TRUE(stepped.norm_topk_prob);
  const bool want[] = {false, true, false, false, false, true};  // (l + 1) % 2 == 0, not layer 3
  for (int64_t l = 0; l < 6; ++l) EXPECT_EQ(stepped.layer_is_moe(l), want[l]) << "layer " << l;

  ModelConfig next = parse(R"({"model_type": "qwen3_next", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 4, "num_attention_heads": 4})");
  EXPECT_EQ(next.num_experts, 512);
  EXPECT_EQ(next.num_experts_per_tok, 10);
  EXPECT_EQ(next.moe_intermediate_size, 512);
  EXPECT_EQ(next.shared_expert_intermediate_size, 512);
  EXPECT_TRUE(next.norm_topk_prob);
  EXPECT_TRUE(next.has_moe());

  // The multimodal wrapper: no dense intermediate_size, every layer sparse, always renormalised.
  ModelConfig q35 = parse(R"({"model_type": "qwen3_5_moe", "text_config": {
    "model_type": "qwen3_5_moe_text", "vocab_size": 8, "hidden_size": 64, "num_hidden_layers": 4,
    "num_attention_heads": 4, "norm_topk_prob": false}})");
  EXPECT_EQ(q35.model_type, "qwen3_5_moe_text");
  EXPECT_EQ(q35.weight_prefix, "model.language_model.");
  EXPECT_EQ(q35.num_experts, 256);
  EXPECT_EQ(q35.num_experts_per_tok, 8);
  EXPECT_EQ(q35.shared_expert_intermediate_size, 512);
  EXPECT_TRUE(q35.norm_topk_prob);
  EXPECT_EQ(q35.intermediate_size, 0);
  for (int64_t l = 0; l < 4; ++l) EXPECT_TRUE(q35.layer_is_moe(l));

  // Every layer listed as dense: a dense model (the experts' fields are not read).
  ModelConfig dense = parse(R"({"model_type": "qwen3_next", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 2, "num_attention_heads": 4,
    "mlp_only_layers": [0, 1], "num_experts_per_tok": 0})");
  EXPECT_FALSE(dense.has_moe());
}

// Mistral: the llama architecture; sliding_window absent means MistralConfig's 4096, null none.
TEST(ConfigTest, MistralWindowDefaults) {
  const std::string base = R"("model_type": "mistral", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 2, "num_attention_heads": 4)";
  ModelConfig absent = parse("{" + base + "}");
  EXPECT_EQ(absent.sliding_window, 4096);
  EXPECT_EQ(absent.attention_window(1), 4096);
  EXPECT_EQ(absent.max_position_embeddings, 131072);
  EXPECT_EQ(absent.head_dim, 16);
  EXPECT_FALSE(absent.qk_norm);
  ModelConfig none = parse("{" + base + R"(, "sliding_window": null, "head_dim": 128,
    "attention_bias": true})");
  EXPECT_EQ(none.attention_window(0), 0);
  EXPECT_EQ(none.head_dim, 128);
  EXPECT_FALSE(none.attention_bias);  // MistralAttention has no biases
  EXPECT_EQ(parse("{" + base + R"(, "sliding_window": 7})").attention_window(0), 7);
  expect_error("{" + base + R"(, "sliding_window": -1})", {"sliding_window"});
}

TEST(ConfigTest, MoeErrorsNameTheField) {
  const std::string base = R"("model_type": "qwen3_moe", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 4, "num_attention_heads": 4)";
  expect_error("{" + base + R"(, "num_experts": 4, "num_experts_per_tok": 5})",
               {"dir/config.json", "num_experts_per_tok", "[1, 4]", "5"});
  expect_error("{" + base + R"(, "decoder_sparse_step": 0})", {"decoder_sparse_step", ">= 1"});
  expect_error("{" + base + R"(, "mlp_only_layers": [1, 9]})", {"mlp_only_layers", "9", "[0, 4)"});
  expect_error("{" + base + R"(, "moe_intermediate_size": 0})", {"moe_intermediate_size"});
  expect_error("{" + base + R"(, "hidden_act": "gelu"})", {"hidden_act", "gelu", "silu"});
  expect_error("{" + base + R"(, "use_sliding_window": true})", {"use_sliding_window"});
  // Routed experts on a dense family would be silently dropped: refused.
  expect_error(R"({"model_type": "qwen3_5_text", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_experts": 8})", {"num_experts", "qwen3_5_moe_text"});
  expect_error(R"({"model_type": "qwen2_moe"})", {"qwen2_moe", "not supported", "qwen3_moe"});
}

TEST(ConfigTest, UnknownTypeAndBadFields) {
  expect_error(R"({"model_type": "gpt2"})",
               {"dir/config.json", "model_type", "gpt2", "llama", "qwen3_5", "qwen3_next"});
  expect_error(R"({"hidden_size": 8})", {"dir/config.json", "model_type"});
  expect_error("{not json", {"dir/config.json", "not valid JSON"});
  expect_error("[]", {"dir/config.json", "object"});
  expect_error(R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 1})", {"dir/config.json", "num_attention_heads"});
  expect_error(R"({"model_type": "llama", "vocab_size": "many", "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 4})",
               {"dir/config.json", "vocab_size", "integer", "many"});
  expect_error(R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 4,
    "num_key_value_heads": 3})", {"num_key_value_heads"});
  expect_error(R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 4,
    "rope_scaling": {"type": "dynamic", "factor": 2}})", {"rope", "dynamic"});
  expect_error(R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 4,
    "rope_scaling": {"rope_type": "llama3", "factor": 2}})",
               {"rope_scaling.original_max_position_embeddings"});
  expect_error(R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 4,
    "tie_word_embeddings": "yes"})", {"tie_word_embeddings", "true or false"});
  expect_error(R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 64,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 4,
    "eos_token_id": "x"})", {"eos_token_id"});
}

TEST(ConfigTest, GenerationConfigOverridesEosAndBos) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("lockstep_cfg_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << kLlama;
  ModelConfig before = load_model_config(dir.string());
  EXPECT_EQ(before.eos_token_ids, (std::vector<int32_t>{128001}));
  EXPECT_EQ(before.source, (dir / "config.json").string());
  std::ofstream(dir / "generation_config.json")
      << R"({"bos_token_id": 7, "eos_token_id": [128001, 128008, 128009], "do_sample": true})";
  ModelConfig c = load_model_config(dir.string());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.bos_token_id, 7);
  std::ofstream(dir / "generation_config.json") << "{oops";
  EXPECT_THROW(load_model_config(dir.string()), Error);
  fs::remove_all(dir);
  try {
    load_model_config(dir.string());
    ADD_FAILURE() << "missing config.json accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace lockstep
