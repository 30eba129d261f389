// Serving in a deliberately tiny KV pool: many concurrent requests grow past what the pool holds,
// so the engine preempts (frees a running sequence's KV, recomputes it when re-admitted), and
// every request still gives exactly the tokens generate() gives for it alone, each token streamed
// once. Greedy and seeded sampling, speculation off, by prompt lookup, by a draft model and (the
// hybrid) by its MTP head, (Gemma 4) by an assistant reading the target's cache; attention-only
// families (block prefix cache) and the Qwen3.5 hybrid (recurrent state, snapshot prefix cache).
#include <gtest/gtest.h>

#include <random>

#include "decode/speculative/drafters.h"
#include "models/gemma4_assistant.h"
#include "scheduler/engine.h"

namespace lockstep {
namespace {

struct Case {
  const char* name;
  std::string target;
  std::string draft, assistant;  // "" when the family has none
  int64_t kv_tokens;             // the pool: far less than the requests' total
  std::vector<std::string> specs;
};

// The target with its drafters: a draft model (sharing the vocabulary) and a Gemma 4 assistant.
struct Loaded {
  std::unique_ptr<Model> target, draft;
  std::unique_ptr<Gemma4Assistant> assistant;
  Loaded(const Case& c, int64_t kv_tokens) {
    ModelOptions o;
    o.kv_capacity_tokens = kv_tokens;
    o.kv_block_tokens = 16;
    target = load_model(c.target, o);
    if (!c.draft.empty()) draft = load_model(c.draft, o);
    if (!c.assistant.empty()) assistant = load_gemma4_assistant(c.assistant, *target);
  }
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<int32_t> collect(RequestStream& s, StreamEvent& finish) {
  std::vector<int32_t> tokens;
  for (;;) {
    EXPECT_TRUE(s.next(finish, std::chrono::seconds(120))) << "no event within 120 s";
    if (finish.kind == StreamEvent::Kind::Finish) return tokens;
    tokens.push_back(finish.token);
  }
}

GenerateResult alone(Loaded& m, const EngineRequest& r) {
  GenerateOptions o = r.options;
  auto drafter = make_drafter(r.spec, *m.target, m.draft.get(), o.sampling, m.assistant.get());
  o.drafter = drafter.get();
  o.draft_width = r.spec == "none" ? 0 : default_draft_width(r.spec);
  return generate(*m.target, r.prompt, o);
}

class Preemption : public ::testing::TestWithParam<Case> {};

TEST_P(Preemption, EveryRequestGivesItsTokensAloneAndPreemptionsHappen) {
  const Case& c = GetParam();
  Loaded served(c, c.kv_tokens), ref(c, 4096);
  EngineOptions eo;
  eo.parallel = 6;
  eo.prefill_chunk = 8;
  eo.max_step_tokens = 32;
  Engine engine(*served.target, eo, served.draft.get(), served.assistant.get());

  std::mt19937 rng(21);
  const int vocab = static_cast<int>(served.target->config().vocab_size);
  const auto token = [&] { return static_cast<int32_t>(3 + rng() % (vocab - 3)); };
  std::vector<int32_t> shared;  // some prompts share a prefix: prefix-cache hits under pressure
  for (int i = 0; i < 20; ++i) shared.push_back(token());
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 10; ++i) {
    EngineRequest r;
    if (i % 3 == 0) r.prompt = shared;
    for (int k = 0, n = 4 + static_cast<int>(rng() % 20); k < n; ++k) r.prompt.push_back(token());
    r.options.max_tokens = 40 + 4 * (i % 4);
    r.options.sampling.temperature = i % 2 ? 0.8f : 0.0f;
    r.options.sampling.seed = 50 + i;
    r.spec = c.specs[i % c.specs.size()];
    reqs.push_back(r);
  }
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine.submit(r));
  for (size_t i = 0; i < reqs.size(); ++i) {
    StreamEvent fin;
    const auto got = collect(*streams[i], fin);
    const GenerateResult want = alone(ref, reqs[i]);
    EXPECT_EQ(got, want.tokens) << c.name << " request " << i << " spec " << reqs[i].spec;
    EXPECT_EQ(fin.finish_reason, want.finish_reason) << i << ": " << fin.error;
    EXPECT_EQ(fin.stats.generated_tokens, static_cast<int64_t>(got.size())) << i;
    EXPECT_EQ(fin.stats.prompt_tokens, static_cast<int64_t>(reqs[i].prompt.size())) << i;
    EXPECT_LT(fin.cached_tokens, static_cast<int64_t>(reqs[i].prompt.size())) << i;
  }
  engine.drain();
  const EngineMetrics m = engine.metrics();
  EXPECT_GT(m.preemptions, 0u) << "the pool was meant to be too small for every request at once";
  EXPECT_EQ(m.requests_finished, reqs.size());
  // Nothing leaked: what is still held is the prefix cache's.
  EXPECT_EQ(m.kv_blocks_used, m.kv_blocks_cached);
}

const std::string kModels = std::string(LOCKSTEP_SOURCE_DIR) + "/models/";
const std::string kFixtures = std::string(LOCKSTEP_SOURCE_DIR) + "/tests/fixtures/";

INSTANTIATE_TEST_SUITE_P(
    Families, Preemption,
    ::testing::Values(
        Case{"dense", kFixtures + "qwen3-f32", kFixtures + "qwen3-f32", "", 192,
             {"none", "lookup", "draft"}},
        Case{"gemma4", kFixtures + "gemma4-assistant-f32/target", "",
             kFixtures + "gemma4-assistant-f32/assistant", 192, {"none", "assistant", "lookup"}},
        Case{"hybrid", kModels + "lockstep-code-16m", kModels + "lockstep-draft-3m", "", 192,
             {"none", "lookup", "draft", "mtp"}}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace lockstep
