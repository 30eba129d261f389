// The prefix caches on their own: the block cache reuses every full block of the longest cached
// prefix, shared (the pool's free count does not move on a hit, and a block two requests computed
// is cached once), evicts least recently used blocks nobody else holds, and a request decoded from
// shared blocks gives generate()'s tokens; the snapshot cache of a hybrid reuses whole states at
// lengths they represent, sharing their full blocks.
#include <gtest/gtest.h>

#include <random>

#include "decode/generate.h"
#include "decode/prefill.h"
#include "decode/sequence_decoder.h"
#include "scheduler/block_prefix_cache.h"
#include "scheduler/snapshot_prefix_cache.h"

namespace lockstep {
namespace {

std::unique_ptr<Model> fixture(const std::string& name) {
  ModelOptions mo;
  mo.kv_capacity_tokens = 1024;  // 64 blocks of 16
  mo.kv_block_tokens = 16;
  return load_model(std::string(LOCKSTEP_SOURCE_DIR) + "/tests/fixtures/" + name, mo);
}

std::vector<int32_t> ids(int n, uint32_t seed, int vocab = 257) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = static_cast<int32_t>(3 + rng() % (vocab - 3));
  return v;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::unique_ptr<SequenceState> prefilled(Model& m, const std::vector<int32_t>& tokens) {
  auto s = m.new_sequence();
  prefill(m, *s, tokens);
  return s;
}

TEST(BlockPrefixCache, ReusesEveryFullBlockOfTheLongestPrefixShared) {
  auto m = fixture("qwen3-f32");
  const KvPool& pool = m->kv_pool();
  BlockPrefixCache cache(*m);
  const std::vector<int32_t> a = ids(40, 1);
  auto sa = prefilled(*m, a);
  const int64_t free = pool.free_blocks();
  cache.insert(a, *sa);
  EXPECT_EQ(cache.blocks(), 2) << "full blocks only";
  EXPECT_EQ(pool.free_blocks(), free) << "caching shares, never copies";
  EXPECT_EQ(pool.holders(sa->kv_blocks[1]), 2);
  const std::vector<int32_t> a_blocks = sa->kv_blocks;
  sa.reset();
  EXPECT_EQ(pool.free_blocks(), free + 1) << "the partly filled block went back";

  auto hit = cache.lookup(concat(a, {7, 8}));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->length, 32);
  EXPECT_EQ(hit->kv_blocks, std::vector<int32_t>(a_blocks.begin(), a_blocks.begin() + 2));
  EXPECT_EQ(pool.free_blocks(), free + 1) << "a hit takes no block";
  // One token must remain to run: a prompt of exactly 32 reuses one block only.
  EXPECT_EQ(cache.lookup(std::vector<int32_t>(a.begin(), a.begin() + 32))->length, 16);
  // Only the first block in common: one block.
  std::vector<int32_t> diverging = a;
  diverging[20] += 1;
  EXPECT_EQ(cache.lookup(diverging)->length, 16);
  EXPECT_EQ(cache.lookup(ids(40, 2)), nullptr);

  // The same prefix computed by another request is not cached twice.
  auto sb = prefilled(*m, concat(std::vector<int32_t>(a.begin(), a.begin() + 32), ids(20, 3)));
  cache.insert(concat(std::vector<int32_t>(a.begin(), a.begin() + 32), ids(20, 3)), *sb);
  EXPECT_EQ(cache.blocks(), 3);
}

TEST(BlockPrefixCache, EvictsLeastRecentlyUsedBlocksNobodyElseHolds) {
  auto m = fixture("qwen3-f32");
  const KvPool& pool = m->kv_pool();
  BlockPrefixCache cache(*m);
  const std::vector<int32_t> x = ids(33, 4), y = ids(33, 5);
  cache.insert(x, *prefilled(*m, x));
  cache.insert(y, *prefilled(*m, y));
  EXPECT_EQ(pool.free_blocks(), pool.total_blocks() - 4);
  EXPECT_EQ(cache.reclaimable_blocks(), 4);
  ASSERT_TRUE(cache.lookup(x));  // x is used (held, then let go): now more recent than y
  EXPECT_TRUE(cache.free_up(pool.free_blocks() + 2));
  EXPECT_EQ(cache.blocks(), 2);
  EXPECT_EQ(cache.lookup(y), nullptr) << "y was the least recently used";
  auto held = cache.lookup(x);
  ASSERT_TRUE(held);
  EXPECT_EQ(cache.reclaimable_blocks(), 0);
  EXPECT_FALSE(cache.free_up(pool.total_blocks())) << "x's blocks are in use";
  EXPECT_EQ(cache.blocks(), 2);
  held.reset();
  EXPECT_TRUE(cache.free_up(pool.total_blocks()));
  EXPECT_EQ(cache.blocks(), 0);
}

// A request decoded from shared blocks gives generate()'s tokens, and its prefix took no memory.
TEST(BlockPrefixCache, DecodingFromSharedBlocksGivesTheTokensOfARecompute) {
  auto m = fixture("qwen3-f32");
  BlockPrefixCache cache(*m);
  const std::vector<int32_t> shared = ids(48, 6), prompt = concat(shared, ids(5, 7));
  cache.insert(shared, *prefilled(*m, shared));
  GenerateOptions o;
  o.max_tokens = 24;
  o.sampling.temperature = 0.8f;
  o.sampling.seed = 3;
  const std::vector<int32_t> want = generate(*m, prompt, o).tokens;

  const int64_t free = m->kv_pool().free_blocks();
  auto state = cache.lookup(prompt);
  ASSERT_TRUE(state);
  EXPECT_EQ(state->length, 48);
  EXPECT_EQ(m->kv_pool().free_blocks(), free);
  SequenceDecoder d(*m, prompt, o, {}, std::move(state));
  while (!d.finished()) {
    ForwardItem item = d.next_item();
    d.consume(m->forward({&item, 1}), 0);
  }
  EXPECT_EQ(d.result().tokens, want);
}

TEST(SnapshotPrefixCache, ReusesWholeStatesWhereTheyAreExactSharingTheirBlocks) {
  auto m = fixture("qwen35-f32");
  const KvPool& pool = m->kv_pool();
  const int vocab = static_cast<int>(m->config().vocab_size);
  SnapshotPrefixCache cache(*m, 2);
  const std::vector<int32_t> a = ids(37, 8, vocab);
  auto sa = prefilled(*m, a);
  const int64_t free = pool.free_blocks();
  cache.insert(a, *sa);
  EXPECT_EQ(pool.free_blocks(), free - 1) << "the entry copies only its partly filled block";
  EXPECT_EQ(cache.blocks(), 3);
  EXPECT_EQ(cache.reclaimable_blocks(), 1) << "two blocks are the running sequence's too";

  auto hit = cache.lookup(concat(a, {5}));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->length, 37);
  EXPECT_EQ(hit->kv_blocks[0], sa->kv_blocks[0]);
  // A recurrent state exactly represents its own length: a shorter prompt cannot use it.
  EXPECT_EQ(cache.lookup(std::vector<int32_t>(a.begin(), a.begin() + 30)), nullptr);
  EXPECT_EQ(cache.lookup(ids(40, 9, vocab)), nullptr);

  // At most two entries: the least recently used goes.
  const std::vector<int32_t> b = ids(20, 10, vocab), c = ids(20, 11, vocab);
  cache.insert(b, *prefilled(*m, b));
  cache.insert(c, *prefilled(*m, c));
  EXPECT_EQ(cache.lookup(concat(a, {5})), nullptr);
  EXPECT_TRUE(cache.lookup(concat(c, {5})));
}

}  // namespace
}  // namespace lockstep
