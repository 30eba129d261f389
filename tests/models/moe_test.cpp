// Mixture of experts: routing (ties to the lowest expert id, rank order, renormalisation), every
// published expert layout giving the same bits (one tensor per expert, transformers' fused 3-D
// tensors, MLX's quantized switch_mlp, lockstep quantize's 3-D output, --quantize at load), and
// the load errors for a broken checkpoint naming the tensor and what was expected.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "model_test_util.h"
#include "models/model.h"
#include "models/moe_routing.h"
#include "models/quantize.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using test::logits_in_pieces;
using test::random_ids;

TEST(MoeRouting, TopKInRankOrderWithTiesToTheLowestId) {
  // Token 0: experts 3 and 1 tie for first, 0 and 2 tie below: ids ascending within a tie.
  // Token 1: a clear order 2 > 0 > 3 > 1.
  const std::vector<float> logits = {0.5f, 2.0f, 0.5f, 2.0f, 1.0f, -1.0f, 3.0f, 0.0f};
  const Routing r = route_tokens(logits, 2, 4, 3, false);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 3, 0, 2, 0, 3}));
  EXPECT_EQ(r.weights[0], r.weights[1]);
  EXPECT_GT(r.weights[1], r.weights[2]);
  float row = 0;
  for (int j = 0; j < 3; ++j) row += r.weights[j];
  EXPECT_LT(row, 1.0f);  // unnormalised: the softmax mass of the chosen three

  const Routing n = route_tokens(logits, 2, 4, 3, true);
  EXPECT_EQ(n.experts, r.experts);
  for (int t = 0; t < 2; ++t) {
    float s = 0;
    for (int j = 0; j < 3; ++j) s += n.weights[t * 3 + j];
    EXPECT_NEAR(s, 1.0f, 1e-6f);
  }
  // All equal: the k lowest ids. A NaN never outranks a number.
  const std::vector<float> flat = {1.0f, 1.0f, 1.0f, 1.0f};
  EXPECT_EQ(route_tokens(flat, 1, 4, 2, true).experts, (std::vector<int32_t>{0, 1}));
  EXPECT_THROW(route_tokens(flat, 1, 4, 5, true), Error);
}

// A large call routed over a pool (any thread count) gives the one-thread routing's bits.
TEST(MoeRouting, PoolRoutingIsOneThreadRoutingBitwise) {
  const int64_t T = 300, E = 128, k = 8;
  std::vector<float> logits(static_cast<size_t>(T * E));
  uint32_t s = 7;
  for (float& x : logits) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int>(s >> 24) % 17 - 8) * 0.37f;  // coarse: many ties
  }
  logits[5 * E + 3] = NAN;
  const Routing want = route_tokens(logits, T, E, k, true);
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    const Routing got = route_tokens(logits, T, E, k, true, &pool);
    EXPECT_EQ(got.experts, want.experts) << threads << " threads";
    ASSERT_EQ(got.weights.size(), want.weights.size());
    EXPECT_EQ(std::memcmp(got.weights.data(), want.weights.data(), want.weights.size() * 4), 0)
        << threads << " threads";
  }
}

TEST(MoeRouting, GroupByExpertIsExpertOrderWithTokensAscending) {
  // 3 tokens, k = 2 over 4 experts: token 0 -> (2, 0), token 1 -> (0, 3), token 2 -> (2, 3).
  Routing r;
  r.tokens = 3;
  r.k = 2;
  r.experts = {2, 0, 0, 3, 2, 3};
  r.weights.assign(6, 0.5f);
  const ExpertGroups g = group_by_expert(r, 4);
  EXPECT_EQ(g.count, (std::vector<int64_t>{2, 0, 2, 2}));
  EXPECT_EQ(g.first, (std::vector<int64_t>{0, 2, 2, 4}));
  // Rows: expert 0 (tokens 0, 1), expert 2 (tokens 0, 2), expert 3 (tokens 1, 2).
  EXPECT_EQ(g.source, (std::vector<int32_t>{0, 1, 0, 2, 1, 2}));
  // Assignment t * k + j -> its row.
  EXPECT_EQ(g.slot, (std::vector<int32_t>{2, 0, 1, 4, 3, 5}));
}

fs::path fixture(const std::string& name) {
  return fs::path(LOCKSTEP_SOURCE_DIR) / "tests" / "fixtures" / name;
}

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() /
                     ("lockstep-moe-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  test::remove_at_exit(d);
  return d;
}

// A copy of checkpoint `src` in one file, each tensor passed through `edit` (which may drop it
// by returning no tensors, rename or reshape it); side files copied as they are.
using Edit = std::function<std::vector<TensorToWrite>(const TensorInfo&)>;
fs::path rewrite(const fs::path& src, const std::string& name, const Edit& edit) {
  const fs::path d = scratch(name);
  auto ckpt = Checkpoint::open(src.string());
  std::vector<TensorToWrite> out;
  for (const std::string& n : ckpt->names())
    for (TensorToWrite& t : edit(*ckpt->find(n))) out.push_back(std::move(t));
  write_safetensors((d / "model.safetensors").string(), out);
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().extension() == ".json" && e.path().filename() != "model.safetensors.index.json")
      fs::copy_file(e.path(), d / e.path().filename());
  return d;
}

TensorToWrite as_is(const TensorInfo& t) {
  return {t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)};
}

// A copy of a checkpoint with one tensor per expert, its experts stacked into transformers 5's
// fused experts.gate_up_proj [E][2I][H] (gate rows first) and experts.down_proj [E][H][I].
fs::path fused_copy(const fs::path& src, const std::string& name) {
  const fs::path d = scratch(name);
  auto ckpt = Checkpoint::open(src.string());
  std::vector<TensorToWrite> out;
  std::map<std::string, TensorToWrite> gate_up, down;  // by "...mlp.experts." stem
  for (const std::string& n : ckpt->names()) {
    const TensorInfo& t = *ckpt->find(n);
    const size_t at = n.find("experts.");
    if (at == std::string::npos) {
      out.push_back(as_is(t));
      continue;
    }
    const std::string stem = n.substr(0, at + 8), rest = n.substr(at + 8);
    const std::string proj = rest.substr(rest.find('.') + 1);  // gate_proj.weight ...
    const int64_t E = ckpt->find(stem.substr(0, at) + "gate.weight")->shape[0];
    const int64_t e = std::stoll(rest);
    TensorToWrite& g = proj == "down_proj.weight" ? down[stem] : gate_up[stem];
    if (g.name.empty()) {
      const bool is_down = proj == "down_proj.weight";
      g = {stem + (is_down ? "down_proj" : "gate_up_proj"), t.dtype,
           {E, is_down ? t.shape[0] : 2 * t.shape[0], t.shape[1]}, {}};
      g.bytes.resize(static_cast<size_t>(E) * (is_down ? 1 : 2) * t.nbytes);
    }
    const size_t slot = proj == "down_proj.weight" ? e : 2 * e + (proj == "up_proj.weight");
    std::memcpy(g.bytes.data() + slot * t.nbytes, t.data, t.nbytes);
  }
  for (auto* m : {&gate_up, &down})
    for (auto& [stem, t] : *m) out.push_back(std::move(t));
  write_safetensors((d / "model.safetensors").string(), out);
  fs::copy_file(src / "config.json", d / "config.json");
  return d;
}

bool is_router(const TensorInfo& t) {
  const std::string tail = "mlp.gate.weight";
  return t.name.size() >= tail.size() && t.name.compare(t.name.size() - tail.size(), tail.size(),
                                                       tail) == 0;
}

// The router's first `experts` rows.
TensorToWrite trim_router(const TensorInfo& t, int64_t experts) {
  TensorToWrite w = as_is(t);
  w.bytes.resize(w.bytes.size() / w.shape[0] * experts);
  w.shape[0] = experts;
  return w;
}

void set_config(const fs::path& dir, const std::string& key, const nlohmann::json& value) {
  nlohmann::json c;
  std::ifstream(dir / "config.json") >> c;
  c[key] = value;
  std::ofstream(dir / "config.json") << c.dump(2);
}

std::vector<float> logits_of(const fs::path& dir, const ModelOptions& o = {}) {
  auto m = load_model(dir.string(), o);
  const std::vector<int32_t> ids = random_ids(23, static_cast<int>(m->config().vocab_size), 3);
  return logits_in_pieces(*m, ids, {23});
}

void expect_load_error(const fs::path& dir, std::initializer_list<std::string> parts) {
  try {
    load_model(dir.string());
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << p << "\"";
    return;
  }
  ADD_FAILURE() << "no error loading " << dir;
}

TEST(MoeCheckpoint, EveryLayoutGivesTheSameBits) {
  // qwen3moe-f32 holds one tensor per expert (as save_pretrained writes); its -fused twin the same
  // weights as 3-D gate_up_proj / down_proj in two shards.
  const auto per_expert = logits_of(fixture("qwen3moe-f32"));
  EXPECT_EQ(per_expert, logits_of(fixture("qwen3moe-fused-f32")));

  // Quantized (a shape the group size fits): at load from either layout, and `lockstep
  // quantize` of the fused checkpoint (3-D codes under the fused names), all the same bits.
  const fs::path tiny = test::tiny_checkpoint("tiny-qwen3-moe");
  const fs::path tiny_fused = fused_copy(tiny, "tiny-fused");
  EXPECT_EQ(logits_of(tiny), logits_of(tiny_fused));
  ModelOptions q4;
  q4.quantize_bits = 4;
  q4.quantize_group_size = 32;
  const auto at_load = logits_of(tiny, q4);
  EXPECT_NE(at_load, logits_of(tiny));
  EXPECT_EQ(at_load, logits_of(tiny_fused, q4));
  QuantizeOptions qo;
  qo.in_dir = tiny_fused.string();
  qo.out_dir = scratch("quantized").string();
  qo.bits = 4;
  qo.group_size = 32;
  quantize_checkpoint(qo);
  auto qckpt = Checkpoint::open(qo.out_dir);
  const TensorInfo& codes = qckpt->require("model.layers.0.mlp.experts.gate_up_proj");
  EXPECT_EQ(codes.dtype, DType::U32);
  EXPECT_EQ(codes.shape, (std::vector<int64_t>{8, 64, 64 * 4 / 32}));
  EXPECT_EQ(qckpt->require("model.layers.0.mlp.experts.gate_up_proj.scales").shape,
            (std::vector<int64_t>{8, 64, 64 / 32}));
  EXPECT_EQ(qckpt->require("model.layers.0.mlp.gate.weight").dtype, DType::F32);  // router float
  EXPECT_EQ(at_load, logits_of(qo.out_dir));

  // MLX's switch_mlp names: gate_up split into gate_proj and up_proj (rows [0, I) and [I, 2I) of
  // each expert), down_proj renamed.
  const fs::path mlx = rewrite(qo.out_dir, "switch", [](const TensorInfo& t) {
    const std::string fused = "experts.gate_up_proj", down = "experts.down_proj";
    const size_t at = t.name.find("experts.");
    if (at == std::string::npos) return std::vector<TensorToWrite>{as_is(t)};
    const std::string stem = t.name.substr(0, at) + "switch_mlp.";
    const std::string suffix = t.name.substr(t.name.find("_proj") + 5);  // "", ".scales", ...
    const std::string leaf = suffix.empty() ? ".weight" : suffix;
    if (t.name.compare(at, down.size(), down) == 0)
      return std::vector<TensorToWrite>{{stem + "down_proj" + leaf, t.dtype, t.shape,
                                         std::vector<uint8_t>(t.data, t.data + t.nbytes)}};
    EXPECT_EQ(t.name.compare(at, fused.size(), fused), 0) << t.name;
    const int64_t E = t.shape[0], half = t.shape[1] / 2;
    const size_t row = t.nbytes / static_cast<size_t>(E * t.shape[1]);
    TensorToWrite gate{stem + "gate_proj" + leaf, t.dtype, {E, half, t.shape[2]}, {}};
    TensorToWrite up{stem + "up_proj" + leaf, t.dtype, {E, half, t.shape[2]}, {}};
    for (int64_t e = 0; e < E; ++e) {
      const uint8_t* base = t.data + e * 2 * half * row;
      gate.bytes.insert(gate.bytes.end(), base, base + half * row);
      up.bytes.insert(up.bytes.end(), base + half * row, base + 2 * half * row);
    }
    return std::vector<TensorToWrite>{gate, up};
  });
  EXPECT_EQ(at_load, logits_of(mlx));
}

TEST(MoeCheckpoint, BrokenCheckpointsNameTheTensor) {
  const fs::path src = fixture("qwen3moe-f32");
  const std::string p = "model.layers.2.mlp.";
  const fs::path missing = rewrite(src, "missing", [&](const TensorInfo& t) {
    return t.name == p + "experts.4.up_proj.weight" ? std::vector<TensorToWrite>{}
                                                    : std::vector<TensorToWrite>{as_is(t)};
  });
  expect_load_error(missing, {"experts.4.up_proj.weight", "missing"});

  // Config and router disagree: the router's shape is the first thing checked.
  const fs::path fewer = rewrite(src, "fewer", [](const TensorInfo& t) {
    return std::vector<TensorToWrite>{as_is(t)};
  });
  set_config(fewer, "num_local_experts", 5);
  expect_load_error(fewer, {"model.layers.0.mlp.gate.weight", "[5, 24]", "[6, 24]"});

  const fs::path router = rewrite(src, "router", [&](const TensorInfo& t) {
    return std::vector<TensorToWrite>{t.name == p + "gate.weight" ? trim_router(t, 5) : as_is(t)};
  });
  expect_load_error(router, {p + "gate.weight", "[6, 24]", "[5, 24]"});

  // Routers and config say 5, but a sixth expert's tensors are there: another model.
  const fs::path extra = rewrite(src, "extra", [](const TensorInfo& t) {
    return std::vector<TensorToWrite>{is_router(t) ? trim_router(t, 5) : as_is(t)};
  });
  set_config(extra, "num_local_experts", 5);
  expect_load_error(extra, {"experts.5.gate_proj.weight", "num_experts = 5"});

  const fs::path no_experts = rewrite(src, "none", [&](const TensorInfo& t) {
    return t.name.find(p + "experts.") == 0 ? std::vector<TensorToWrite>{}
                                            : std::vector<TensorToWrite>{as_is(t)};
  });
  expect_load_error(no_experts, {"no experts under " + p, "gate_up_proj", "switch_mlp"});

  // Fused: the 3-D tensor's expert count is checked against the config.
  const fs::path wrong_count = rewrite(fixture("qwen3moe-fused-f32"), "fused-count",
                                       [](const TensorInfo& t) {
    return std::vector<TensorToWrite>{is_router(t) ? trim_router(t, 4) : as_is(t)};
  });
  set_config(wrong_count, "num_experts", 4);
  expect_load_error(wrong_count, {"experts.gate_up_proj", "[4, 40, 24]", "[6, 40, 24]"});
}

}  // namespace
}  // namespace lockstep
