// Every config field that changes transformers' math, one family at a time, set to a
// non-default value on a tiny checkpoint: lockstep either computes with it (the logits change
// from the unedited checkpoint's; transformers parity of the implemented fields is in
// reference_parity_test.cpp), refuses it with an error naming the field, or, where the field
// reshapes the checkpoint, fails naming the tensor it then expects. Fields transformers itself
// never reads for the family are listed too and must change nothing. Nothing in between: a field
// accepted and ignored would show unchanged logits under Changes, and fail the test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "model_test_util.h"
#include "models/model.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

enum class Verdict {
  Changes,  // implemented: the logits differ from the unedited checkpoint's
  Refused,  // an error naming `expect` (the field)
  Tensors,  // the field reshapes the checkpoint: an error naming `expect` (a tensor it needs)
  Unread,   // transformers does not read it for this family either: the logits are the same
};

struct FieldCase {
  const char* checkpoint;  // make-random preset, or "fixture:<name>"
  const char* field;       // dotted path into config.json
  json value;
  Verdict verdict;
  const char* expect;  // Refused / Tensors: a substring of the error; Unread: why
};

std::string source_dir(const std::string& checkpoint) {
  const std::string fixture = "fixture:";
  if (checkpoint.rfind(fixture, 0) == 0)
    return std::string(LOCKSTEP_SOURCE_DIR) + "/tests/fixtures/" + checkpoint.substr(fixture.size());
  return test::tiny_checkpoint(checkpoint);
}

// A copy of `src` whose config.json has `field` set to `value` (weights linked, not copied).
std::string edited(const std::string& src, const std::string& field, const json& value, int n) {
  const fs::path dir = fs::temp_directory_path() /
                       ("lockstep-fields-" + std::to_string(::getpid()) + "-" + std::to_string(n));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().filename() != "config.json") fs::create_symlink(e.path(), dir / e.path().filename());
  json cfg;
  std::ifstream(fs::path(src) / "config.json") >> cfg;
  json* at = &cfg;
  for (size_t b = 0, dot; b <= field.size(); b = dot + 1) {
    dot = field.find('.', b);
    if (dot == std::string::npos) dot = field.size();
    at = &(*at)[field.substr(b, dot - b)];
  }
  *at = value;
  std::ofstream(dir / "config.json") << cfg.dump(2);
  return dir.string();
}

std::vector<float> logits(const std::string& dir) {
  auto m = load_model(dir);
  const auto ids = test::random_ids(20, static_cast<int>(m->config().vocab_size), 11);
  return test::logits_in_pieces(*m, ids, {20});
}

// The table. Prompts are 20 tokens, longer than every tiny preset's sliding window (8).
const std::vector<FieldCase>& cases() {
  static const std::vector<FieldCase> table = {
      // llama
      {"tiny-llama", "hidden_act", "gelu", Verdict::Refused, "hidden_act"},
      {"tiny-llama", "rms_norm_eps", 0.1, Verdict::Changes, ""},
      {"tiny-llama", "rope_theta", 500000.0, Verdict::Changes, ""},
      {"tiny-llama", "rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}, Verdict::Changes, ""},
      {"tiny-llama", "rope_scaling", {{"rope_type", "dynamic"}, {"factor", 2.0}}, Verdict::Refused,
       "rope_scaling"},
      {"tiny-llama", "rope_scaling.low_freq_factor", 2.0, Verdict::Changes, ""},
      {"tiny-llama", "tie_word_embeddings", true, Verdict::Unread,
       "transformers 5.17 keeps a checkpoint's own lm_head that differs from the embedding "
       "(it warns and does not tie; checked on the GPU machine)"},
      {"tiny-llama", "attention_bias", true, Verdict::Tensors, "q_proj.bias"},
      {"tiny-llama", "mlp_bias", true, Verdict::Tensors, "gate_proj.bias"},
      {"tiny-llama", "num_experts", 4, Verdict::Refused, "num_experts"},
      // mistral
      {"tiny-mistral", "sliding_window", nullptr, Verdict::Changes, ""},
      {"tiny-mistral", "sliding_window", 4, Verdict::Changes, ""},
      {"tiny-mistral", "hidden_act", "gelu", Verdict::Refused, "hidden_act"},
      {"tiny-mistral", "attention_bias", true, Verdict::Unread,
       "MistralAttention has no biases whatever the config says"},
      // qwen2
      {"fixture:qwen2-f32", "use_sliding_window", true, Verdict::Refused, "use_sliding_window"},
      {"fixture:qwen2-f32", "attention_bias", false, Verdict::Unread,
       "Qwen2Attention always has q/k/v biases"},
      {"fixture:qwen2-f32", "max_window_layers", 1, Verdict::Unread,
       "read only with use_sliding_window"},
      // qwen3
      {"tiny-qwen3", "use_sliding_window", true, Verdict::Refused, "use_sliding_window"},
      {"tiny-qwen3", "layer_types", {"sliding_attention", "full_attention"}, Verdict::Unread,
       "without use_sliding_window Qwen3Config sets sliding_window to None: every layer full"},
      {"tiny-qwen3", "attention_bias", true, Verdict::Tensors, "q_proj.bias"},
      {"tiny-qwen3", "rope_scaling",
       {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 1024}},
       Verdict::Changes, ""},
      {"tiny-qwen3", "hidden_act", "relu", Verdict::Refused, "hidden_act"},
      // qwen3_moe
      {"tiny-qwen3-moe", "num_experts_per_tok", 2, Verdict::Changes, ""},
      {"tiny-qwen3-moe", "norm_topk_prob", false, Verdict::Changes, ""},
      {"tiny-qwen3-moe", "mlp_only_layers", json::array(), Verdict::Tensors, "mlp.gate.weight"},
      {"tiny-qwen3-moe", "num_experts", 6, Verdict::Tensors, "gate.weight"},
      {"tiny-qwen3-moe", "router_aux_loss_coef", 0.5, Verdict::Unread, "a training loss"},
      // qwen3.5 hybrid
      {"tiny-qwen3.5", "rope_parameters.partial_rotary_factor", 0.5, Verdict::Changes, ""},
      {"tiny-qwen3.5", "rope_parameters.rope_theta", 1000.0, Verdict::Changes, ""},
      {"tiny-qwen3.5", "attn_output_gate", false, Verdict::Refused, "attn_output_gate"},
      {"tiny-qwen3.5", "linear_conv_kernel_dim", 3, Verdict::Tensors, "conv1d"},
      // qwen3_next
      {"fixture:qwen3next-f32", "partial_rotary_factor", 0.5, Verdict::Changes, ""},
      {"fixture:qwen3next-moe-f32", "norm_topk_prob", true, Verdict::Changes, ""},
      {"fixture:qwen3next-moe-f32", "num_experts_per_tok", 1, Verdict::Changes, ""},
      // gemma3
      {"tiny-gemma3", "sliding_window", 16, Verdict::Changes, ""},
      {"tiny-gemma3", "query_pre_attn_scalar", 64.0, Verdict::Changes, ""},
      {"tiny-gemma3", "final_logit_softcapping", 5.0, Verdict::Changes, ""},
      {"tiny-gemma3", "rope_local_base_freq", 50000.0, Verdict::Changes, ""},
      {"tiny-gemma3", "rope_scaling", nullptr, Verdict::Changes, ""},
      {"tiny-gemma3", "attn_logit_softcapping", 50.0, Verdict::Refused, "attn_logit_softcapping"},
      {"tiny-gemma3", "hidden_activation", "gelu", Verdict::Refused, "hidden_activation"},
      {"tiny-gemma3", "use_bidirectional_attention", true, Verdict::Refused,
       "use_bidirectional_attention"},
      // gemma4
      {"tiny-gemma4", "sliding_window", 16, Verdict::Changes, ""},
      {"tiny-gemma4", "final_logit_softcapping", 5.0, Verdict::Changes, ""},
      {"tiny-gemma4", "rms_norm_eps", 0.1, Verdict::Changes, ""},
      {"tiny-gemma4", "rope_parameters.full_attention.rope_theta", 1000.0, Verdict::Changes, ""},
      {"tiny-gemma4", "rope_parameters.full_attention.partial_rotary_factor", 1.0,
       Verdict::Changes, ""},
      {"tiny-gemma4", "rope_parameters.sliding_attention.rope_theta", 100.0, Verdict::Changes, ""},
      {"tiny-gemma4", "attention_k_eq_v", false, Verdict::Tensors, "k_proj"},
      {"tiny-gemma4", "num_kv_shared_layers", 0, Verdict::Tensors, "k_proj"},
      {"tiny-gemma4", "use_double_wide_mlp", false, Verdict::Tensors, "mlp"},
      {"tiny-gemma4", "hidden_size_per_layer_input", 8, Verdict::Tensors, "per_layer"},
      {"tiny-gemma4", "attention_bias", true, Verdict::Refused, "attention_bias"},
      {"tiny-gemma4", "use_bidirectional_attention", "all", Verdict::Refused,
       "use_bidirectional_attention"},
      {"tiny-gemma4", "hidden_activation", "silu", Verdict::Refused, "hidden_activation"},
      {"tiny-gemma4", "rope_parameters.full_attention.rope_type", "yarn", Verdict::Refused,
       "rope_type"},
      {"tiny-gemma4", "query_pre_attn_scalar", 4.0, Verdict::Unread,
       "Gemma 4 does not scale its scores (scaling 1.0)"},
      {"tiny-gemma4", "use_bidirectional_attention", "vision", Verdict::Unread,
       "only vision tokens attend both ways"},
      {"tiny-gemma4-moe", "top_k_experts", 3, Verdict::Changes, ""},
      {"tiny-gemma4-moe", "num_experts", 6, Verdict::Tensors, "router.proj"},
  };
  return table;
}

std::string describe(const FieldCase& c) {
  return std::string(c.checkpoint) + " " + c.field + " = " + c.value.dump();
}

TEST(ConfigFields, EveryFieldIsImplementedOrRefusedNeverIgnored) {
  std::map<std::string, std::vector<float>> baseline;
  int n = 0;
  for (const FieldCase& c : cases()) {
    SCOPED_TRACE(describe(c));
    const std::string src = source_dir(c.checkpoint);
    if (!baseline.count(src)) baseline[src] = logits(src);
    const std::string dir = edited(src, c.field, c.value, n++);
    std::vector<float> got;
    std::string error;
    try {
      got = logits(dir);
    } catch (const Error& e) {
      error = e.what();
    }
    fs::remove_all(dir);
    switch (c.verdict) {
      case Verdict::Changes:
        EXPECT_EQ(error, "");
        if (error.empty()) {
          EXPECT_NE(got, baseline[src]) << "accepted but the logits did not change";
        }
        break;
      case Verdict::Refused:
      case Verdict::Tensors:
        EXPECT_NE(error.find(c.expect), std::string::npos)
            << (error.empty() ? "accepted" : "error does not name " + std::string(c.expect) +
                                                 ": " + error);
        break;
      case Verdict::Unread:
        EXPECT_EQ(error, "");
        if (error.empty()) {
          EXPECT_EQ(got, baseline[src]) << c.expect;
        }
        break;
    }
  }
}

}  // namespace
}  // namespace lockstep
