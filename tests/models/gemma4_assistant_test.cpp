// The Gemma 4 assistant drafter: its config (transformers' defaults and every refusal by field),
// parity with transformers' float64 Gemma4AssistantForCausalLM on the gemma4-assistant-f32 fixture
// (tools/reference/assistant_reference.py: a target and two assistants, lm_head and centroid-masked
// logits), and on random presets that drafting only reads the target's cache, that steps batched
// together give the bits of steps run alone, and that mismatched targets are refused by field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "core/error.h"
#include "model_test_util.h"
#include "models/gemma4_assistant.h"
#include "models/model.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Gemma4AssistantConfig parse(const std::string& text) {
  return parse_gemma4_assistant_config(text, "config.json");
}

// A minimal valid assistant text config, with `extra` fields merged in.
std::string assistant_json(const std::string& text_extra = "", const std::string& top_extra = "") {
  return R"({"model_type": "gemma4_assistant", )" + top_extra + R"("text_config": {
      "vocab_size": 512, "hidden_size": 32, "num_hidden_layers": 2,
      "layer_types": ["sliding_attention", "full_attention"], "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 32, "global_head_dim": 64,
      "hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0)" +
         text_extra + "}}";
}

TEST(Gemma4AssistantConfig, ReadsTheStackAndTheClassDefaults) {
  const auto a = parse(assistant_json());
  EXPECT_EQ(a.backbone_hidden_size, 1536);
  EXPECT_FALSE(a.use_ordered_embeddings);
  EXPECT_EQ(a.num_centroids, 2048);
  EXPECT_EQ(a.centroid_top_k, 32);
  EXPECT_TRUE(a.tie_word_embeddings);
  EXPECT_EQ(a.text.hidden_size, 32);
  EXPECT_EQ(a.text.gemma4.kv_shared_layers, 2);
  EXPECT_EQ(a.text.gemma4.kv_source, (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(a.text.attention_window(0), 512);
  EXPECT_EQ(a.text.attention_window(1), 0);
  EXPECT_EQ(a.text.head_dim_of(1), 64);
  // num_kv_shared_layers equal to num_hidden_layers is what transformers writes.
  EXPECT_EQ(parse(assistant_json(R"(, "num_kv_shared_layers": 2)")).text.gemma4.kv_shared_layers, 2);
}

TEST(Gemma4AssistantConfig, RefusesWhatTheAssistantCannotHaveNamingTheField) {
  EXPECT_NE(error_of([] { parse(assistant_json(R"(, "num_kv_shared_layers": 1)")); })
                .find("text_config.num_kv_shared_layers"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse(assistant_json(R"(, "enable_moe_block": true, "num_experts": 2,
                "top_k_experts": 1, "moe_intermediate_size": 8)")); })
                .find("text_config.enable_moe_block"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse(assistant_json(R"(, "use_double_wide_mlp": true)")); })
                .find("text_config.use_double_wide_mlp"),
            std::string::npos);
  // hidden_size_per_layer_input defaults to 256 in Gemma4TextConfig: absent is refused too.
  const std::string no_ple = R"({"model_type": "gemma4_assistant", "text_config": {
      "vocab_size": 512, "hidden_size": 32, "num_hidden_layers": 1, "vocab_size_per_layer_input": 0}})";
  EXPECT_NE(error_of([&] { parse(no_ple); }).find("text_config.hidden_size_per_layer_input"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse(assistant_json(R"(, "vocab_size_per_layer_input": 512)")); })
                .find("text_config.vocab_size_per_layer_input"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse(assistant_json("", R"("use_ordered_embeddings": true, "num_centroids": 7, )"));
            }).find("num_centroids"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse(assistant_json("", R"("use_ordered_embeddings": true, "num_centroids": 8,
                  "centroid_intermediate_top_k": 9, )"));
            }).find("centroid_intermediate_top_k"),
            std::string::npos);
  // The assistant is no model of its own.
  EXPECT_NE(error_of([] { parse_model_config(assistant_json(), "config.json"); })
                .find("--spec assistant"),
            std::string::npos);
}

// ---- parity with transformers (float64) ----

double rel_error(const float* got, const nlohmann::json& want) {
  double scale = 0, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i].get<double>()));
    err = std::max(err, std::fabs(got[i] - want[i].get<double>()));
  }
  return err / scale;
}

std::vector<float> floats(const nlohmann::json& row) {
  std::vector<float> v;
  for (const auto& x : row) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

TEST(Gemma4AssistantParity, DraftsMatchTransformersFloat64) {
  const fs::path dir = fs::path(LOCKSTEP_SOURCE_DIR) / "tests" / "fixtures" / "gemma4-assistant-f32";
  // No fixture is a failure: it is made by tools/reference/run_on_device.sh (README there).
  ASSERT_TRUE(fs::exists(dir / "assistant_reference.json"))
      << dir << " is missing: bash tools/reference/run_on_device.sh --only gemma4-assistant-f32";
  nlohmann::json ref;
  std::ifstream(dir / "assistant_reference.json") >> ref;
  auto target = load_model((dir / "target").string());
  const int64_t H = target->config().hidden_size, V = target->config().vocab_size;
  const std::vector<int32_t> ids = ref["ids"];
  const int64_t n = static_cast<int64_t>(ids.size());
  auto seq = target->new_sequence();
  ForwardItem all{seq.get(), ids, ForwardItem::Logits::All};
  const ForwardResult t = target->forward({&all, 1});
  double worst_target = 0;
  for (int64_t p = 0; p < n; ++p) {
    worst_target = std::max(worst_target, rel_error(&t.logits[p * V], ref["target_logits"][p]));
    worst_target = std::max(worst_target, rel_error(&t.hidden[p * H], ref["target_hidden"][p]));
  }
  EXPECT_LT(worst_target, 1e-4);
  ASSERT_EQ(seq->length, ref["position"].get<int64_t>());

  for (const char* name : {"assistant", "assistant-ordered"}) {
    auto a = load_gemma4_assistant((dir / name).string(), *target);
    // Step 1 reads the reference's target hidden, later steps the reference's previous output,
    // so each step's error is its own.
    std::vector<float> h = floats(ref["target_hidden"][n - 1]);
    double worst = 0;
    for (const auto& step : ref["assistants"][name]) {
      const Gemma4Assistant::Step s{seq.get(), step["token"].get<int32_t>(), h};
      const ForwardResult r = a->draft({&s, 1});
      ASSERT_EQ(r.rows, 1);
      worst = std::max(worst, rel_error(r.logits.data(), step["logits"]));
      worst = std::max(worst, rel_error(r.hidden.data(), step["hidden"]));
      h = floats(step["hidden"]);
    }
    EXPECT_LT(worst, 1e-4) << name;
    // Chained from its own outputs, the drafts are transformers' argmax chain.
    std::vector<float> own = floats(ref["target_hidden"][n - 1]);
    int32_t token = ref["first_token"];
    std::vector<int32_t> chain;
    for (size_t j = 0; j < ref["assistants"][name].size(); ++j) {
      const Gemma4Assistant::Step s{seq.get(), token, own};
      const ForwardResult r = a->draft({&s, 1});
      token = static_cast<int32_t>(std::max_element(r.logits.begin(), r.logits.end()) -
                                   r.logits.begin());
      chain.push_back(token);
      own = r.hidden;
    }
    std::vector<int32_t> want = ref["assistants"][std::string(name) + "_tokens"];
    want.erase(want.begin());   // the listed tokens are each step's input: x1, x2, x3
    chain.pop_back();
    EXPECT_EQ(chain, want) << name;
    std::printf("[ assist ] %-18s step logits+hidden %.3g, target %.3g\n", name, worst,
                worst_target);
  }
  EXPECT_EQ(seq->length, n) << "drafting moved the target sequence";
}

// ---- on random presets ----

struct Pair {
  std::unique_ptr<Model> target;
  std::unique_ptr<Gemma4Assistant> assistant;
};
Pair tiny_pair() {
  Pair p;
  p.target = load_model(test::tiny_checkpoint("tiny-gemma4", DType::F32, 3));
  p.assistant = load_gemma4_assistant(test::tiny_checkpoint("tiny-gemma4-assistant", DType::F32, 4),
                                      *p.target);
  return p;
}

TEST(Gemma4Assistant, DraftingOnlyReadsTheTargetCache) {
  Pair p = tiny_pair();
  const std::vector<int32_t> ids = test::random_ids(29, 512, 5);  // past the window of 8
  const std::vector<int32_t> next = {7, 300, 41};
  // Reference: the target alone.
  auto clean = p.target->new_sequence();
  ForwardItem a{clean.get(), ids, ForwardItem::Logits::All};
  const ForwardResult before = p.target->forward({&a, 1});
  ForwardItem b{clean.get(), next, ForwardItem::Logits::All};
  const ForwardResult want = p.target->forward({&b, 1});
  // The same, with drafting (several steps, batched beside another sequence) in between.
  auto seq = p.target->new_sequence();
  auto other = p.target->new_sequence();
  ForwardItem c{seq.get(), ids, ForwardItem::Logits::All};
  const ForwardResult mid = p.target->forward({&c, 1});
  ForwardItem d{other.get(), std::span<const int32_t>(ids).first(11), ForwardItem::Logits::All};
  const ForwardResult mid2 = p.target->forward({&d, 1});
  const int64_t H = 64;
  std::vector<float> h(mid.hidden.end() - H, mid.hidden.end());
  std::vector<float> h2(mid2.hidden.end() - H, mid2.hidden.end());
  for (int i = 0; i < 4; ++i) {
    const Gemma4Assistant::Step steps[2] = {{seq.get(), 100 + i, h}, {other.get(), 200 + i, h2}};
    const ForwardResult r = p.assistant->draft(steps);
    ASSERT_EQ(r.rows, 2);
    // Batched rows give the bits of each step alone.
    const ForwardResult one = p.assistant->draft({&steps[1], 1});
    EXPECT_EQ(std::memcmp(one.logits.data(), r.logits.data() + 512, 512 * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(one.hidden.data(), r.hidden.data() + H, H * sizeof(float)), 0);
    h.assign(r.hidden.begin(), r.hidden.begin() + H);
  }
  EXPECT_EQ(seq->length, 29);
  ForwardItem e{seq.get(), next, ForwardItem::Logits::All};
  const ForwardResult got = p.target->forward({&e, 1});
  ASSERT_EQ(got.logits.size(), want.logits.size());
  EXPECT_EQ(std::memcmp(got.logits.data(), want.logits.data(), want.logits.size() * sizeof(float)),
            0);
  EXPECT_EQ(std::memcmp(mid.logits.data(), before.logits.data(), before.logits.size() * 4), 0);
}

TEST(Gemma4Assistant, TheTokenAndTheHiddenBothReachTheDraft) {
  Pair p = tiny_pair();
  auto seq = p.target->new_sequence();
  const std::vector<int32_t> ids = test::random_ids(20, 512, 9);
  ForwardItem a{seq.get(), ids, ForwardItem::Logits::All};
  const ForwardResult t = p.target->forward({&a, 1});
  const std::vector<float> h(t.hidden.end() - 64, t.hidden.end()),
      h_other(t.hidden.end() - 128, t.hidden.end() - 64);
  const Gemma4Assistant::Step base{seq.get(), 5, h}, token{seq.get(), 6, h},
      hidden{seq.get(), 5, h_other};
  const ForwardResult r = p.assistant->draft({&base, 1});
  for (const auto* s : {&token, &hidden}) {
    const ForwardResult o = p.assistant->draft({s, 1});
    EXPECT_NE(std::memcmp(r.logits.data(), o.logits.data(), 512 * sizeof(float)), 0);
    EXPECT_NE(std::memcmp(r.hidden.data(), o.hidden.data(), 64 * sizeof(float)), 0);
  }
}

TEST(Gemma4Assistant, RefusesTargetsItCannotReadNamingTheField) {
  const std::string assistant = test::tiny_checkpoint("tiny-gemma4-assistant", DType::F32, 4);
  auto qwen = load_model(test::tiny_checkpoint("tiny-qwen3", DType::F32, 3));
  EXPECT_NE(error_of([&] { load_gemma4_assistant(assistant, *qwen); })
                .find("the target's model_type is qwen3"),
            std::string::npos);
  auto small = load_model(test::tiny_checkpoint("small-gemma4", DType::F32, 3));
  EXPECT_NE(error_of([&] { load_gemma4_assistant(assistant, *small); })
                .find("\"backbone_hidden_size\" is 64"),
            std::string::npos);
  // Another Gemma 4 target with the same cache shapes (the MoE preset) is accepted.
  auto moe = load_model(test::tiny_checkpoint("tiny-gemma4-moe", DType::F32, 3));
  EXPECT_EQ(error_of([&] { load_gemma4_assistant(assistant, *moe); }), "(no error)");
  // Head shapes and the window must be those of the target caches it reads.
  auto target = load_model(test::tiny_checkpoint("tiny-gemma4", DType::F32, 3));
  const struct {
    const char *field, *value, *want;
  } cases[] = {{"head_dim", "16", "\"text_config.head_dim\""},
               {"global_head_dim", "32", "\"text_config.global_head_dim\""},
               {"num_key_value_heads", "1", "\"text_config.num_key_value_heads\""},
               {"sliding_window", "16", "\"text_config.sliding_window\""},
               {"vocab_size", "500", "\"text_config.vocab_size\""}};
  for (const auto& c : cases) {
    const fs::path dir = fs::temp_directory_path() /
                         ("lockstep-assistant-" + std::to_string(::getpid()) + "-" + c.field);
    fs::create_directories(dir);
    nlohmann::json cfg;
    std::ifstream(fs::path(assistant) / "config.json") >> cfg;
    cfg["text_config"][c.field] = nlohmann::json::parse(c.value);
    std::ofstream(dir / "config.json") << cfg.dump();
    fs::copy_file(fs::path(assistant) / "model.safetensors", dir / "model.safetensors",
                  fs::copy_options::overwrite_existing);
    EXPECT_NE(error_of([&] { load_gemma4_assistant(dir.string(), *target); }).find(c.want),
              std::string::npos)
        << c.field << ": " << error_of([&] { load_gemma4_assistant(dir.string(), *target); });
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace lockstep
