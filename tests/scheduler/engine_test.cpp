// The serving engine's generation gate: many requests submitted at once (mixed lengths, shared
// prefixes, greedy and seeded sampling, speculation on and off, a small prefill chunk) each give
// exactly the tokens generate() gives for the same request alone. Plus cancellation freeing
// memory, a bounded queue, and drain.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "core/error.h"
#include "decode/speculative/drafters.h"
#include "models/model.h"
#include "scheduler/engine.h"

namespace lockstep {
namespace {

const std::string kTarget = std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-16m";
const std::string kDraft = std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-draft-3m";

std::vector<int32_t> collect(RequestStream& s, StreamEvent* finish) {
  std::vector<int32_t> tokens;
  StreamEvent e;
  for (;;) {
    EXPECT_TRUE(s.next(e, std::chrono::seconds(60))) << "no event within 60 s";
    if (e.kind == StreamEvent::Kind::Finish) break;
    tokens.push_back(e.token);
  }
  if (finish) *finish = e;
  return tokens;
}

EngineRequest make_request(std::vector<int32_t> prompt, int max_tokens, float temp, uint64_t seed,
                           const std::string& spec) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.options.max_tokens = max_tokens;
  r.options.sampling.temperature = temp;
  r.options.sampling.seed = seed;
  if (temp > 0) r.options.sampling.top_p = 0.95f;
  r.options.eos_ids = {0};
  r.spec = spec;
  return r;
}

GenerateResult alone(Model& target, Model& draft, const EngineRequest& r) {
  GenerateOptions o = r.options;
  auto drafter = make_drafter(r.spec, target, &draft, o.sampling);
  o.drafter = drafter.get();
  o.draft_width = r.spec == "none" ? 0 : default_draft_width(r.spec);
  return generate(target, r.prompt, o);
}

// The target and draft the engine serves, and a second pair for generate() alone (its own KV
// pools, so nothing the engine caches can reach the reference).
struct GateModels {
  GateModels() {
    ModelOptions mo;
    mo.kv_capacity_tokens = 8192;
    target = load_model(kTarget, mo);
    draft = load_model(kDraft, mo);
    ref_target = load_model(kTarget, mo);
    ref_draft = load_model(kDraft, mo);
  }
  std::unique_ptr<Model> target, draft, ref_target, ref_draft;
};

TEST(Engine, ConcurrentRequestsEqualGenerateAlone) {
  const GateModels models;
  EngineOptions eo;
  eo.parallel = 6;
  eo.prefill_chunk = 7;
  eo.max_step_tokens = 40;
  Engine engine(*models.target, eo, models.draft.get());

  std::mt19937 rng(11);
  const std::vector<int32_t> shared = [&] {
    std::vector<int32_t> v;
    for (int i = 0; i < 40; ++i) v.push_back(static_cast<int32_t>(3 + rng() % 8000));
    return v;
  }();
  const std::string specs[] = {"none", "lookup", "draft", "mtp"};
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> p;
    if (i % 3 == 0) p = shared;  // long shared prefix: prefix-cache hits for later ones
    const int extra = 1 + static_cast<int>(rng() % 30);
    for (int k = 0; k < extra; ++k) p.push_back(static_cast<int32_t>(3 + rng() % 8000));
    reqs.push_back(make_request(p, 16 + i % 3 * 8, i % 2 ? 0.8f : 0.0f, 100 + i, specs[i % 4]));
  }
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine.submit(r));
  for (size_t i = 0; i < reqs.size(); ++i) {
    StreamEvent fin;
    const auto got = collect(*streams[i], &fin);
    const auto want = alone(*models.ref_target, *models.ref_draft, reqs[i]);
    EXPECT_EQ(got, want.tokens) << "request " << i << " spec " << reqs[i].spec;
    EXPECT_EQ(fin.finish_reason, want.finish_reason) << "request " << i;
  }
  // A second wave after the first finished: prompts extending cached sequences hit the cache.
  std::vector<std::shared_ptr<RequestStream>> wave2;
  std::vector<EngineRequest> reqs2;
  for (int i = 0; i < 4; ++i) {
    auto p = reqs[static_cast<size_t>(i * 3)].prompt;
    p.push_back(static_cast<int32_t>(5 + i));
    reqs2.push_back(make_request(p, 16, 0.0f, 7, i % 2 ? "lookup" : "none"));
    wave2.push_back(engine.submit(reqs2.back()));
  }
  for (size_t i = 0; i < reqs2.size(); ++i)
    EXPECT_EQ(collect(*wave2[i], nullptr), alone(*models.ref_target, *models.ref_draft, reqs2[i]).tokens);
  const EngineMetrics m = engine.metrics();
  EXPECT_GT(m.prefix_cache_hits, 0u);
  EXPECT_GT(m.forward_calls, 0u);
  EXPECT_GT(m.batch_rows_total, m.forward_calls) << "requests never shared a forward";
  EXPECT_EQ(m.spec_paused_steps, 0u) << "spec_max_batch 0 withholds no drafts";
}

// Speculation decided per step: while more than spec_max_batch sequences decode, steps run
// without drafts; once fewer remain, drafting resumes (the draft model and the MTP head catch up
// on the tokens they missed). The tokens are generate()'s alone either way.
TEST(Engine, StepsPastSpecMaxBatchRunWithoutDraftsAndKeepTokens) {
  const GateModels models;

  std::mt19937 rng(23);
  const std::string specs[] = {"lookup", "draft", "mtp"};
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p;
    const int len = 5 + static_cast<int>(rng() % 20);
    for (int k = 0; k < len; ++k) p.push_back(static_cast<int32_t>(3 + rng() % 8000));
    // Lengths from 8 to 48 tokens: the longest decode on alone at the end, with drafts again.
    reqs.push_back(make_request(p, 8 + 8 * i, i % 2 ? 0.8f : 0.0f, 300 + i, specs[i % 3]));
  }
  std::vector<GenerateResult> want;
  for (const auto& r : reqs) want.push_back(alone(*models.ref_target, *models.ref_draft, r));

  // The six requests at once under a limit; the engine's metrics after they finished.
  auto serve = [&](int spec_max_batch) {
    EngineOptions eo;
    eo.parallel = 6;
    eo.prefill_chunk = 16;
    eo.max_step_tokens = 64;
    eo.spec_max_batch = spec_max_batch;
    Engine engine(*models.target, eo, models.draft.get());
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& r : reqs) streams.push_back(engine.submit(r));
    for (size_t i = 0; i < reqs.size(); ++i) {
      StreamEvent fin;
      EXPECT_EQ(collect(*streams[i], &fin), want[i].tokens)
          << "request " << i << " spec " << reqs[i].spec << ", spec_max_batch " << spec_max_batch;
      EXPECT_EQ(fin.finish_reason, want[i].finish_reason) << "request " << i;
    }
    return engine.metrics();
  };
  const EngineMetrics limited = serve(2), unlimited = serve(0);
  EXPECT_GT(limited.spec_paused_steps, 0u) << "six sequences decoded together, over the limit of 2";
  EXPECT_EQ(unlimited.spec_paused_steps, 0u);
  EXPECT_GT(limited.drafted, 0u) << "drafting never resumed once two or fewer sequences decoded";
  EXPECT_LT(limited.drafted, unlimited.drafted) << "the limit withheld no drafts";
}

// A request extending a finished one starts from its cached blocks, shared, not copied: in a pool
// of 6 blocks the 4 cached blocks and the new request's 5 fit together (copies would need 9), and
// its tokens are generate()'s alone.
TEST(Engine, PrefixHitsShareCachedBlocks) {
  ModelOptions mo;
  mo.kv_capacity_tokens = 96;
  mo.kv_block_tokens = 16;
  const std::string dense = std::string(LOCKSTEP_SOURCE_DIR) + "/tests/fixtures/qwen3-f32";
  auto target = load_model(dense, mo);
  auto ref = load_model(dense);
  Engine engine(*target, {});
  std::mt19937 rng(3);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 64; ++i) prompt.push_back(static_cast<int32_t>(3 + rng() % 250));
  auto a = make_request(prompt, 8, 0.0f, 0, "none");
  a.options.eos_ids.clear();
  collect(*engine.submit(a), nullptr);
  auto b = a;
  for (int32_t t : {7, 8, 9, 10, 11}) b.prompt.push_back(t);
  b.options.sampling.temperature = 0.8f;
  b.options.sampling.seed = 5;
  StreamEvent fin;
  EXPECT_EQ(collect(*engine.submit(b), &fin), generate(*ref, b.prompt, b.options).tokens);
  EXPECT_EQ(fin.cached_tokens, 64);
  EngineMetrics m = engine.metrics();
  for (int i = 0; i < 100 && m.running > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    m = engine.metrics();
  }
  EXPECT_EQ(m.prefix_tokens_reused, 64u);
  EXPECT_EQ(m.preemptions, 0u);
  EXPECT_EQ(m.kv_blocks_cached, 4) << "both requests' first 64 tokens are one chain of 4 blocks";
  EXPECT_EQ(m.kv_blocks_used, 4);
}

TEST(Engine, CancelFreesMemoryAndQueueIsBounded) {
  ModelOptions mo;
  mo.kv_capacity_tokens = 4096;
  auto target = load_model(kTarget, mo);
  EngineOptions eo;
  eo.parallel = 1;
  eo.max_queue = 2;
  eo.prefix_cache = false;
  Engine engine(*target, eo);
  auto first = engine.submit(make_request({5, 6, 7}, 2000, 0.0f, 0, "none"));
  StreamEvent e;
  ASSERT_TRUE(first->next(e, std::chrono::seconds(30)));  // it is running
  auto q1 = engine.submit(make_request({5, 6}, 4, 0.0f, 0, "none"));
  auto q2 = engine.submit(make_request({5, 6}, 4, 0.0f, 0, "none"));
  EXPECT_THROW(engine.submit(make_request({5, 6}, 4, 0.0f, 0, "none")), QueueFull);
  first->cancel();
  collect(*q1, nullptr);
  collect(*q2, nullptr);
  for (int i = 0; i < 100 && engine.metrics().running > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.running, 0u);
  EXPECT_EQ(m.kv_blocks_used, 0) << "a cancelled or finished sequence kept KV blocks";
  EXPECT_EQ(m.requests_cancelled, 1u);
  EXPECT_THROW(engine.submit(make_request({}, 4, 0.0f, 0, "none")), Error);
  EXPECT_THROW(engine.submit(make_request({1}, 100000, 0.0f, 0, "none")), Error);
}

TEST(Engine, DrainFinishesInFlightAndRefusesNew) {
  auto target = load_model(kTarget);
  Engine engine(*target, {});
  auto s = engine.submit(make_request({5, 6, 7, 8}, 40, 0.0f, 0, "none"));
  std::thread t([&] { engine.drain(); });
  StreamEvent fin;
  const auto tokens = collect(*s, &fin);
  t.join();
  EXPECT_EQ(fin.finish_reason == "length" || fin.finish_reason == "stop", true);
  EXPECT_FALSE(tokens.empty());
  EXPECT_THROW(engine.submit(make_request({5}, 4, 0.0f, 0, "none")), ShuttingDown);
}


// The queue is bounded by the requests it holds (running or waiting), not by those the engine has
// not taken yet: parallel + max_queue requests submitted at once are all accepted, however the
// engine thread is scheduled, and the n choices of one request are queued together or not at all.
TEST(Engine, HoldsParallelPlusQueueAtOnceAndGroupsAreAllOrNothing) {
  ModelOptions mo;
  mo.kv_capacity_tokens = 4096;
  auto target = load_model(kTarget, mo);
  EngineOptions eo;
  eo.parallel = 2;
  eo.max_queue = 2;
  eo.prefix_cache = false;
  Engine engine(*target, eo);
  EXPECT_EQ(engine.capacity(), 4u);
  std::vector<std::shared_ptr<RequestStream>> held;
  for (int i = 0; i < 3; ++i) held.push_back(engine.submit(make_request({5, 6, 7}, 300, 0.0f, 0, "none")));
  std::vector<EngineRequest> pair(2, make_request({5, 6}, 4, 0.0f, 0, "none"));
  EXPECT_THROW(engine.submit_all(pair), QueueFull) << "a group of 2 with 1 place left";
  held.push_back(engine.submit(make_request({5, 6}, 4, 0.0f, 0, "none")));
  EXPECT_THROW(engine.submit(make_request({5, 6}, 4, 0.0f, 0, "none")), QueueFull);
  EXPECT_EQ(engine.metrics().requests_rejected, 2u);
  for (auto& s : held) s->cancel();
  for (auto& s : held) collect(*s, nullptr);
  // Every finished request gave its place back.
  auto again = engine.submit_all(std::vector<EngineRequest>(4, make_request({5, 6}, 2, 0.0f, 0, "none")));
  for (auto& s : again) collect(*s, nullptr);
}

// Requests the engine took but cannot admit yet (their prompt does not fit in the KV memory left
// beside the running sequences) are still queued.
TEST(Engine, QueueDepthCountsRequestsWaitingForMemory) {
  ModelOptions mo;
  mo.kv_capacity_tokens = 512;
  auto target = load_model(kTarget, mo);
  EngineOptions eo;
  eo.parallel = 4;
  eo.prefix_cache = false;
  Engine engine(*target, eo);
  auto r = make_request({5, 6, 7}, 300, 0.0f, 0, "none");
  r.options.eos_ids.clear();
  auto first = engine.submit(r);
  // 500 prompt tokens need all 32 blocks of the pool: it waits for the first to end.
  auto second = engine.submit(make_request(std::vector<int32_t>(500, 5), 5, 0.0f, 0, "none"));
  StreamEvent e;
  ASSERT_TRUE(first->next(e, std::chrono::seconds(30)));
  EngineMetrics m = engine.metrics();
  for (int i = 0; i < 100 && m.running != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    m = engine.metrics();
  }
  EXPECT_EQ(m.running, 1u);
  EXPECT_EQ(m.queue_depth, 1u);
  first->cancel();
  second->cancel();
  collect(*first, nullptr);
  collect(*second, nullptr);
}

// The context rule is prompt + max_tokens <= context, with and without speculation: a request
// that fills the context exactly runs to the end, one more token is refused up front.
TEST(Engine, PromptPlusMaxTokensMayFillTheContextExactly) {
  ModelOptions mo;
  mo.kv_capacity_tokens = 128;
  auto target = load_model(kTarget, mo);
  auto draft = load_model(kDraft, mo);
  EngineOptions eo;
  eo.parallel = 1;
  eo.prefix_cache = false;
  Engine engine(*target, eo, draft.get());
  const int64_t ctx = engine.context_tokens();
  ASSERT_EQ(ctx, 128);
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9};
  for (const char* spec : {"none", "lookup", "draft", "mtp"}) {
    auto r = make_request(prompt, static_cast<int>(output_room(5, ctx)), 0.0f, 0, spec);
    r.options.eos_ids.clear();
    StreamEvent fin;
    EXPECT_EQ(collect(*engine.submit(r), &fin).size(), static_cast<size_t>(ctx - 5)) << spec;
    EXPECT_EQ(fin.finish_reason, "length") << spec << ": " << fin.error;
    r.options.max_tokens += 1;
    EXPECT_THROW(engine.submit(r), Error) << spec;
  }
  EXPECT_THROW(engine.submit(make_request(std::vector<int32_t>(128, 5), 1, 0.0f, 0, "none")), Error);
}

}  // namespace
}  // namespace lockstep
