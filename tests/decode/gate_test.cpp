// The generation gate as a test: speculation (lookup and a rollback-heavy draft model), chunked
// prefill and batching give classic decode's exact tokens at temperature 0 and seeded sampling;
// and the gate is able to fail: on a model with near-tied logits, `fast` numerics (multi-row calls
// reduced in another order) flips generations while `exact` does not.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "../models/model_test_util.h"
#include "decode/speculative/draft_model_drafter.h"
#include "decode/speculative/lookup_drafter.h"
#include "decode/verify_gate.h"
#include "io/safetensors.h"
#include "kernels/numerics.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

std::string random_model(const std::string& like, uint64_t seed) {
  return test::tiny_checkpoint(like, DType::F32, seed);
}

// A copy of `src` whose (tied) embedding rows come in near-identical pairs: row 2i+1 = row 2i
// plus noise of relative size 1e-7, so the two logits tie up to float32 rounding. Real
// vocabularies of 150k tokens over thousands of positions meet such near-ties all the time.
std::string near_tie_model(const std::string& src) {
  const fs::path dir = fs::path(src).string() + "-neartie";
  test::remove_at_exit(dir);
  fs::create_directories(dir);
  fs::copy_file(fs::path(src) / "config.json", dir / "config.json",
                fs::copy_options::overwrite_existing);
  auto ckpt = Checkpoint::open(src);
  std::vector<TensorToWrite> out;
  std::mt19937 rng(5);
  std::normal_distribution<float> noise(0.0f, 1e-7f);
  for (const auto& name : ckpt->names()) {
    const TensorInfo& t = *ckpt->find(name);
    TensorToWrite w{name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)};
    if (name == "model.embed_tokens.weight") {
      float* e = reinterpret_cast<float*>(w.bytes.data());
      const int64_t V = t.shape[0], D = t.shape[1];
      for (int64_t r = 1; r < V; r += 2)
        for (int64_t d = 0; d < D; ++d) e[r * D + d] = e[(r - 1) * D + d] * (1.0f + noise(rng));
    }
    out.push_back(std::move(w));
  }
  write_safetensors((dir / "model.safetensors").string(), out);
  return dir.string();
}

std::vector<std::vector<int32_t>> prompts(int64_t vocab) {
  std::vector<std::vector<int32_t>> p;
  std::mt19937 rng(3);
  for (int n : {3, 9, 17, 30}) {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(rng() % vocab));
    for (int i = 0; i < n / 2; ++i) ids.push_back(ids[i]);  // repeats give lookup matches
    p.push_back(ids);
  }
  return p;
}

TEST(Gate, SpeculationBatchingAndChunkingNeverChangeTheTokens) {
  auto target = load_model(random_model("tiny-qwen3", 1));
  auto draft = load_model(random_model("tiny-qwen3", 2));  // disagrees often: many rollbacks
  GateConfig cfg;
  cfg.prompts = prompts(target->config().vocab_size);
  cfg.max_tokens = 40;
  cfg.draft_model = draft.get();
  const GateReport r = run_gate(*target, cfg);
  EXPECT_EQ(r.diverged(), 0u);
  EXPECT_EQ(r.cases.size(), 2u * 4u * (1 + 1 + 5 + 4));
  // The draft model must have been rejected sometimes, or rollback went untested.
  int64_t drafted = 0, accepted = 0;
  for (const auto& c : r.cases)
    if (c.mode.rfind("draft", 0) == 0) {
      drafted += c.spec.drafted;
      accepted += c.spec.accepted;
    }
  EXPECT_GT(drafted, 0);
  EXPECT_LT(accepted, drafted);
}

TEST(Gate, SeededSamplingWithFiltersAndPenaltiesIsIdenticalUnderSpeculation) {
  auto target = load_model(random_model("tiny-qwen3", 1));
  auto draft = load_model(random_model("tiny-qwen3", 2));
  const auto ps = prompts(target->config().vocab_size);
  for (float temp : {0.3f, 0.8f, 1.2f}) {
    GenerateOptions o;
    o.max_tokens = 32;
    o.sampling.temperature = temp;
    o.sampling.seed = 77;
    o.sampling.top_k = 40;
    o.sampling.top_p = 0.9f;
    o.sampling.min_p = 0.02f;
    o.sampling.repetition_penalty = 1.1f;
    o.sampling.presence_penalty = 0.3f;
    o.sampling.frequency_penalty = 0.2f;
    for (const auto& p : ps) {
      const auto classic = generate(*target, p, o).tokens;
      for (int w : {1, 3}) {
        LookupDrafter lookup;
        DraftModelDrafter dm(*draft, o.sampling);
        for (Drafter* d : {static_cast<Drafter*>(&lookup), static_cast<Drafter*>(&dm)}) {
          GenerateOptions s = o;
          s.drafter = d;
          s.draft_width = w;
          EXPECT_EQ(generate(*target, p, s).tokens, classic)
              << d->name() << " width " << w << " temperature " << temp;
        }
      }
    }
  }
}

TEST(Gate, FailsWhenMultiRowCallsReduceInAnotherOrder) {
  const std::string dir = near_tie_model(random_model("tiny-qwen3", 1));
  auto model = load_model(dir);
  GateConfig cfg;
  cfg.prompts = prompts(model->config().vocab_size);
  cfg.max_tokens = 48;
  cfg.temperatures = {0.0f};
  cfg.lookup_widths = {2, 4};
  kernels::set_numerics(kernels::Numerics::Exact);
  EXPECT_EQ(run_gate(*model, cfg).diverged(), 0u) << "exact numerics must hold even at near-ties";
  kernels::set_numerics(kernels::Numerics::Fast);
  const GateReport fast = run_gate(*model, cfg);
  kernels::set_numerics(kernels::Numerics::Exact);
  EXPECT_GT(fast.diverged(), 0u) << "the gate could not see a shape-dependent reduction";
}

// After verifying [t, d1..dK] and keeping j drafts, the cache is bitwise what classic decode
// holds: the next token's logits equal those of feeding the kept tokens one at a time.
TEST(Gate, RollbackLeavesTheCacheAsClassicDecodeWould) {
  auto model = load_model(random_model("tiny-qwen3", 1));
  const int64_t V = model->config().vocab_size;
  const std::vector<int32_t> prompt = {5, 9, 13, 200, 7}, block = {11, 42, 300, 8, 99};
  const int32_t next = 17;
  for (size_t keep = 1; keep <= block.size(); ++keep) {
    auto spec = model->new_sequence(), classic = model->new_sequence();
    ForwardItem p1{spec.get(), prompt, ForwardItem::Logits::None};
    ForwardItem p2{classic.get(), prompt, ForwardItem::Logits::None};
    model->forward({&p1, 1});
    model->forward({&p2, 1});
    ForwardItem v{spec.get(), block, ForwardItem::Logits::All, true};
    model->forward({&v, 1});
    model->truncate(*spec, static_cast<int64_t>(prompt.size() + keep));
    for (size_t i = 0; i < keep; ++i) {
      ForwardItem c{classic.get(), {&block[i], 1}, ForwardItem::Logits::None};
      model->forward({&c, 1});
    }
    ForwardItem a{spec.get(), {&next, 1}}, b{classic.get(), {&next, 1}};
    const auto ra = model->forward({&a, 1}), rb = model->forward({&b, 1});
    ASSERT_EQ(ra.logits.size(), static_cast<size_t>(V));
    EXPECT_EQ(ra.logits, rb.logits) << "kept " << keep;
  }
}

}  // namespace
}  // namespace lockstep
