// Gemma 3: the config (class defaults, both RoPE forms, refusals), the embedding scale, and the
// model's invariance with prompts longer than its sliding window: one forward, token by token,
// in chunks, batched, other thread counts and block sizes, after truncation and from a fork (the
// prefix cache) give the same bits; and the window really limits what a sliding layer sees.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model_test_util.h"
#include "models/config.h"
#include "models/gemma3.h"
#include "models/gemma_common.h"
#include "models/model.h"

namespace lockstep {
namespace {

using test::logits_in_pieces;
using test::random_ids;

ModelConfig parse(const std::string& text) { return parse_model_config(text, "config.json"); }

TEST(Gemma3Config, WrappedConfigTakesTheClassDefaults) {
  // gemma-3-4b-it's config.json names only what differs from Gemma3TextConfig.
  const auto c = parse(R"({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text",
      "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34,
      "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024}})");
  EXPECT_EQ(c.model_type, "gemma3_text");
  EXPECT_EQ(c.weight_prefix, "language_model.model.");
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.query_pre_attn_scalar, 256);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.zero_centered_norm && c.qk_norm);
  EXPECT_EQ(c.hidden_activation, "gelu_pytorch_tanh");
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.type, "linear");
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_local_theta, 1e4);
  EXPECT_EQ(c.rope_local_scaling.type, "default");
  EXPECT_EQ(c.final_logit_softcapping, 0.0);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{1});
  EXPECT_EQ(c.bos_token_id, 2);
  // sliding_window_pattern 6: layers 5, 11, ... are global.
  for (int64_t l = 0; l < 34; ++l)
    EXPECT_EQ(c.attention_window(l), (l + 1) % 6 == 0 ? 0 : 1024) << l;
}

TEST(Gemma3Config, RopeParametersByLayerTypeAndLayerTypes) {
  const auto c = parse(R"({"model_type": "gemma3_text", "num_hidden_layers": 3,
      "layer_types": ["full_attention", "sliding_attention", "sliding_attention"],
      "sliding_window": 7, "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 168,
      "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 4.0,
                                             "rope_theta": 500000.0},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}}})");
  EXPECT_EQ(c.attention_window(0), 0);
  EXPECT_EQ(c.attention_window(1), 7);
  EXPECT_EQ(c.attention_window(2), 7);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_EQ(c.rope_local_theta, 20000.0);
  EXPECT_EQ(c.final_logit_softcapping, 30.0);
  EXPECT_EQ(c.query_pre_attn_scalar, 168);
}

TEST(Gemma3Config, FieldsThatChangeTheMathAreRefusedByName) {
  auto refused = [](const std::string& extra, const std::string& field) {
    test::expect_config_refused(R"({"model_type": "gemma3_text", "num_hidden_layers": 2, )" + extra + "}",
                                field);
  };
  refused(R"("attn_logit_softcapping": 50.0)", "attn_logit_softcapping");
  refused(R"("use_bidirectional_attention": true)", "use_bidirectional_attention");
  refused(R"("hidden_activation": "gelu")", "hidden_activation");
  refused(R"("layer_types": ["sliding_attention", "chunked_attention"])", "layer_types");
  refused(R"("layer_types": ["sliding_attention"])", "layer_types");
  refused(R"("sliding_window": null)", "sliding_window");
  refused(R"("sliding_window": 0)", "sliding_window");
  refused(R"("rope_parameters": {"rope_type": "default", "rope_theta": 10000.0})",
          "rope_parameters");
  refused(R"("rope_parameters": {"full_attention": {"rope_type": "dynamic", "factor": 2.0}})",
          "rope_type");
  refused(R"("partial_rotary_factor": 0.5)", "partial_rotary_factor");
  refused(R"("num_experts": 4)", "num_experts");
}

TEST(Gemma3, EmbedScaleIsRoundedAsTransformersRoundsIt) {
  EXPECT_EQ(gemma_embed_scale(3072, DType::BF16), 55.5f);  // transformers' own example
  EXPECT_EQ(gemma_embed_scale(3072, DType::F32), static_cast<float>(std::sqrt(3072.0)));
  EXPECT_EQ(gemma_embed_scale(64, DType::BF16), 8.0f);
}

TEST(Gemma3, LogitsInvariantAcrossTheWindowBoundary) {
  test::expect_invariant_across_the_window(test::tiny_checkpoint("tiny-gemma3"));
}

TEST(Gemma3, TheWindowLimitsWhatSlidingLayersSee) {
  // The same weights with a window wider than the prompt: identical logits while the prompt fits
  // in the real window, different ones after it.
  namespace fs = std::filesystem;
  const std::string dir = test::tiny_checkpoint("tiny-gemma3");
  const fs::path wide = fs::path(dir).string() + "-wide-window";
  fs::create_directories(wide);
  fs::copy_file(fs::path(dir) / "model.safetensors", wide / "model.safetensors",
                fs::copy_options::overwrite_existing);
  nlohmann::json cfg;
  std::ifstream(fs::path(dir) / "config.json") >> cfg;
  cfg["sliding_window"] = 4096;
  std::ofstream(wide / "config.json") << cfg.dump();

  auto narrow_model = load_model(dir), wide_model = load_model(wide.string());
  const int V = static_cast<int>(narrow_model->config().vocab_size);
  const int64_t W = narrow_model->config().sliding_window;
  const auto ids = random_ids(20, V, 9);
  const auto narrow = logits_in_pieces(*narrow_model, ids, {20});
  const auto full = logits_in_pieces(*wide_model, ids, {20});
  EXPECT_EQ(0, std::memcmp(narrow.data(), full.data(), W * V * 4));
  EXPECT_NE(0, std::memcmp(narrow.data() + W * V, full.data() + W * V, (20 - W) * V * 4));
  fs::remove_all(wide);
}

}  // namespace
}  // namespace lockstep
