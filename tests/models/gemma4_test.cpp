// Gemma 4: the config (Gemma4TextConfig's defaults, both published forms of the full layers'
// shape, KV sharing, refusals by name), the proportional RoPE table, and the model's invariance
// with prompts longer than its sliding window on the dense and the MoE preset: one forward,
// token by token, in chunks, batched, other thread counts and block sizes, after truncation and
// from a fork (the prefix cache) give the same bits, KV-sharing layers included.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/error.h"
#include "model_test_util.h"
#include "models/config.h"
#include "models/gemma4.h"
#include "models/model.h"

namespace lockstep {
namespace {

using test::logits_in_pieces;
using test::random_ids;

ModelConfig parse(const std::string& text) { return parse_model_config(text, "config.json"); }

TEST(Gemma4Config, TextConfigTakesTheClassDefaults) {
  const auto c = parse(R"({"model_type": "gemma4_text"})");
  EXPECT_EQ(c.vocab_size, 262144);
  EXPECT_EQ(c.hidden_size, 2304);
  EXPECT_EQ(c.num_hidden_layers, 30);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.zero_centered_norm);
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_EQ(c.gemma4.per_layer_input_size, 256);
  EXPECT_EQ(c.gemma4.per_layer_vocab, 262144);
  EXPECT_EQ(c.gemma4.sliding_rope.type, "default");
  EXPECT_EQ(c.gemma4.sliding_rope.theta, 1e4);
  EXPECT_EQ(c.gemma4.full_rope.type, "proportional");
  EXPECT_EQ(c.gemma4.full_rope.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.gemma4.full_rope.theta, 1e6);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{1});
  EXPECT_EQ(c.bos_token_id, 2);
  for (int64_t l = 0; l < 30; ++l) {
    const bool full = (l + 1) % 6 == 0;
    EXPECT_EQ(c.attention_window(l), full ? 0 : 512) << l;
    EXPECT_EQ(c.head_dim_of(l), full ? 512 : 256) << l;  // global_head_dim's default
    EXPECT_EQ(c.kv_heads_of(l), 4) << l;  // num_global_key_value_heads needs attention_k_eq_v
    EXPECT_EQ(c.gemma4.kv_source[l], l) << l;
  }
}

TEST(Gemma4Config, TheLastLayerIsAlwaysFull) {
  const auto c = parse(R"({"model_type": "gemma4_text", "num_hidden_layers": 3,
      "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]})");
  EXPECT_EQ(c.attention_window(2), 0);
  EXPECT_EQ(c.head_dim_of(2), 512);
}

TEST(Gemma4Config, PublishedAndTransformersFormsOfTheFullLayersAgree) {
  const std::string common = R"("model_type": "gemma4_text", "num_hidden_layers": 4,
      "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
      "attention_k_eq_v": true,
      "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                      "full_attention"])";
  const auto published =
      parse("{" + common + R"(, "global_head_dim": 128, "num_global_key_value_heads": 2})");
  const auto per_layer = parse("{" + common + R"(, "per_layer_config": {
      "1": {"head_dim": 128, "num_key_value_heads": 2},
      "3": {"head_dim": 128, "num_key_value_heads": 2}}})");
  EXPECT_EQ(published.layer_head_dims, (std::vector<int64_t>{64, 128, 64, 128}));
  EXPECT_EQ(published.layer_kv_heads, (std::vector<int64_t>{4, 2, 4, 2}));
  EXPECT_EQ(per_layer.layer_head_dims, published.layer_head_dims);
  EXPECT_EQ(per_layer.layer_kv_heads, published.layer_kv_heads);
  // The wrapper: weights under model.language_model., the text config's fields.
  const auto wrapped = parse(R"({"model_type": "gemma4", "text_config": {)" + common +
                             R"(, "global_head_dim": 128}})");
  EXPECT_EQ(wrapped.model_type, "gemma4_text");
  EXPECT_EQ(wrapped.weight_prefix, "model.language_model.");
  EXPECT_EQ(wrapped.layer_kv_heads, (std::vector<int64_t>{4, 4, 4, 4}))
      << "num_global_key_value_heads absent: the full layers keep num_key_value_heads";
}

TEST(Gemma4Config, KvSharingLayersReadTheLastEarlierLayerOfTheirType) {
  const auto c = parse(R"({"model_type": "gemma4_text", "num_hidden_layers": 7,
      "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                      "sliding_attention", "full_attention", "sliding_attention",
                      "full_attention"],
      "num_kv_shared_layers": 3, "global_head_dim": 512, "use_double_wide_mlp": true})");
  EXPECT_EQ(c.gemma4.kv_source, (std::vector<int64_t>{0, 1, 2, 3, 1, 3, 1}));
  EXPECT_TRUE(c.gemma4.double_wide_mlp);
  // Keys and values cached per position: layers 0..3 only.
  EXPECT_EQ(c.kv_elements_per_token(), 2 * (3 * 4 * 256 + 4 * 512));
}

TEST(Gemma4Config, FieldsThatChangeTheMathAreRefusedByName) {
  auto refused = [](const std::string& extra, const std::string& field) {
    test::expect_config_refused(R"({"model_type": "gemma4_text", "num_hidden_layers": 2, )" + extra + "}",
                                field);
  };
  refused(R"("attention_bias": true)", "attention_bias");
  refused(R"("use_bidirectional_attention": "all")", "use_bidirectional_attention");
  refused(R"("hidden_activation": "gelu")", "hidden_activation");
  refused(R"("rope_scaling": {"rope_type": "linear", "factor": 2.0})", "rope_scaling");
  refused(R"("rope_parameters": {"full_attention": {"rope_type": "yarn", "rope_theta": 1e6,
            "factor": 4.0}, "sliding_attention": {"rope_theta": 1e4}})", "rope_type");
  refused(R"("rope_parameters": {"full_attention": {"rope_theta": 1e6}})", "sliding_attention");
  refused(R"("num_kv_shared_layers": 2)", "num_kv_shared_layers");
  refused(R"("layer_types": ["full_attention", "full_attention"], "num_kv_shared_layers": 1,
            "per_layer_config": {"1": {"head_dim": 64}})", "head_dim");
  refused(R"("per_layer_config": {"0": {"sliding_window": 4}})", "sliding_window");
  refused(R"("per_layer_config": {"5": {"head_dim": 64}})", "per_layer_config");
  refused(R"("enable_moe_block": true, "num_experts": 8)", "top_k_experts");
  refused(R"("enable_moe_block": true, "num_experts": 4, "top_k_experts": 8,
            "moe_intermediate_size": 16)", "top_k_experts");
  refused(R"("vocab_size": 1000, "vocab_size_per_layer_input": 500)",
          "vocab_size_per_layer_input");
  refused(R"("sliding_window": null)", "sliding_window");
}

TEST(Gemma4, ProportionalRopeRotatesOnlyItsShareOfEachHalf) {
  ModelConfig::Gemma4::Rope r{"proportional", 1e6, 0.25, 1.0};
  const auto table = gemma4_rope_table(r, 512);
  ASSERT_EQ(table.rotary_dim(), 512);  // the whole head, the rest with inv_freq 0
  for (int64_t i = 0; i < 256; ++i) EXPECT_EQ(table.inv_freq()[i] == 0.0f, i >= 64) << i;
  EXPECT_EQ(table.inv_freq()[0], 1.0f);
  ModelConfig::Gemma4::Rope d{"default", 1e4, 0.25, 1.0};  // default ignores the factor
  const auto whole = gemma4_rope_table(d, 256);
  for (float f : whole.inv_freq()) EXPECT_GT(f, 0.0f);
}

class Gemma4Invariance : public ::testing::TestWithParam<std::string> {};

TEST_P(Gemma4Invariance, LogitsInvariantAcrossTheWindowBoundaryAndKvSharing) {
  test::expect_invariant_across_the_window(test::tiny_checkpoint(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Presets, Gemma4Invariance,
                         ::testing::Values("tiny-gemma4", "tiny-gemma4-moe"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST(Gemma4, TheTinyPresetsSwitchEveryFeatureOn) {
  const ModelConfig c = load_model_config(test::tiny_checkpoint("tiny-gemma4"));
  EXPECT_TRUE(c.gemma4.k_eq_v);
  EXPECT_GT(c.gemma4.kv_shared_layers, 0);
  EXPECT_GT(c.gemma4.per_layer_input_size, 0);
  EXPECT_TRUE(c.gemma4.double_wide_mlp);
  EXPECT_NE(c.head_dim_of(2), c.head_dim_of(0));
  const ModelConfig m = load_model_config(test::tiny_checkpoint("tiny-gemma4-moe"));
  EXPECT_TRUE(m.gemma4.moe_block);
  EXPECT_GT(m.num_experts, m.num_experts_per_tok);
}

// The GPU gate's preset (tools/cuda/gemma4_hd512_on_device.sh): the published models' attention
// geometry, with every Gemma 4 attention feature on.
TEST(Gemma4, TheHd512PresetHasThePublishedGeometry) {
  const ModelConfig c = load_model_config(test::tiny_checkpoint("small-gemma4-hd512"));
  ASSERT_EQ(c.num_hidden_layers, 6);
  EXPECT_TRUE(c.gemma4.k_eq_v);
  EXPECT_EQ(c.gemma4.kv_shared_layers, 2);
  EXPECT_GT(c.gemma4.per_layer_input_size, 0);
  EXPECT_GT(c.sliding_window, 256) << "windows cross the 256-position attention chunks";
  int shared_full = 0, shared_sliding = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const bool full = c.attention_window(l) == 0;
    EXPECT_EQ(c.head_dim_of(l), full ? 512 : 256) << l;
    EXPECT_EQ(c.kv_heads_of(l), full ? 1 : 2) << l;
    if (c.gemma4.kv_source[l] != l) ++(full ? shared_full : shared_sliding);
  }
  EXPECT_EQ(shared_full, 1) << "a full layer reads another's head-dim-512 cache";
  EXPECT_EQ(shared_sliding, 1);
}

// Past its sliding window (300) and the first attention chunks: one forward and forwards in
// pieces give the same bits on the CPU, the GPU gate's reference.
TEST(Gemma4, TheHd512PresetIsInvariantAcrossChunksAndTheWindow) {
  ThreadPool two(2);
  ModelOptions o;
  o.pool = &two;
  auto m = load_model(test::tiny_checkpoint("small-gemma4-hd512"), o);
  const int V = static_cast<int>(m->config().vocab_size);
  const auto ids = random_ids(330, V, 5);
  const auto whole = logits_in_pieces(*m, ids, {330});
  ASSERT_EQ(whole.size(), ids.size() * V);
  EXPECT_EQ(whole, logits_in_pieces(*m, ids, {100, 1, 37}));
  ModelOptions o3 = o;
  o3.kv_block_tokens = 3;
  auto m3 = load_model(test::tiny_checkpoint("small-gemma4-hd512"), o3);
  EXPECT_EQ(whole, logits_in_pieces(*m3, ids, {257, 73}));
}

// Head dim 512 is no longer refused for the GPU: loading there either succeeds (a GPU is present)
// or fails for another reason (none is), never naming the head dims.
TEST(Gemma4, CudaTakesHeadDim512) {
  ModelOptions o;
  o.device = kernels::Device::Cuda;
  try {
    load_model(test::tiny_checkpoint("small-gemma4-hd512"), o);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("head_dim"), std::string::npos) << e.what();
  }
}

TEST(Gemma4, CudaRefusesHeadDimsItsAttentionLacks) {
  ModelOptions o;
  o.device = kernels::Device::Cuda;
  try {
    load_model(test::tiny_checkpoint("tiny-gemma4"), o);  // head dims 32 and 64
    ADD_FAILURE() << "gemma4 with head_dim 32 loaded on --device cuda";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim 32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lockstep
