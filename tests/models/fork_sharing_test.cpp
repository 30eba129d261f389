// Model::fork shares KV blocks instead of copying them: the full blocks of the prefix are the
// source's own blocks (the pool's free count does not move), only the partly filled last block is
// copied, and the recurrent state of a hybrid is cloned. A forked sequence then decodes the bits a
// recompute gives, and its writes never reach its source (nor the source's the fork), for an
// attention-only family and a Gated DeltaNet hybrid.
#include <gtest/gtest.h>

#include "model_test_util.h"
#include "models/model.h"

namespace lockstep {
namespace {

std::string fixture(const std::string& name) {
  return std::string(LOCKSTEP_SOURCE_DIR) + "/tests/fixtures/" + name;
}

// Last-row logits after feeding `tokens` to `seq`.
std::vector<float> run(Model& m, SequenceState& seq, std::vector<int32_t> tokens) {
  ForwardItem it{&seq, tokens, ForwardItem::Logits::Last};
  return m.forward({&it, 1}).logits;
}

class ForkSharing : public ::testing::TestWithParam<const char*> {};

TEST_P(ForkSharing, SharesFullBlocksCopiesTheLastAndDecodesTheSameBits) {
  ModelOptions mo;
  mo.kv_capacity_tokens = 512;
  mo.kv_block_tokens = 16;
  auto m = load_model(fixture(GetParam()), mo);
  const KvPool& pool = m->kv_pool();
  const int V = static_cast<int>(m->config().vocab_size);
  const std::vector<int32_t> prompt = test::random_ids(37, V, 5), next = {3, 9, 4};

  // The reference: prompt then `next`, on a sequence of its own.
  auto ref = m->new_sequence();
  run(*m, *ref, prompt);
  const std::vector<float> want = run(*m, *ref, next);

  auto src = m->new_sequence();
  run(*m, *src, prompt);
  ASSERT_EQ(src->kv_blocks.size(), 3u);
  const int64_t free = pool.free_blocks();
  auto fork = m->fork(*src, 37);
  EXPECT_EQ(pool.free_blocks(), free - 1) << "only the partly filled block may be copied";
  EXPECT_EQ(fork->kv_blocks[0], src->kv_blocks[0]);
  EXPECT_EQ(fork->kv_blocks[1], src->kv_blocks[1]);
  EXPECT_NE(fork->kv_blocks[2], src->kv_blocks[2]);
  EXPECT_EQ(pool.holders(src->kv_blocks[0]), 2);

  // Both continue with the same tokens: each gives the reference's bits (the fork wrote first,
  // so the source also shows it was not disturbed).
  EXPECT_EQ(run(*m, *fork, next), want);
  EXPECT_EQ(run(*m, *src, next), want);
  fork.reset();
  EXPECT_EQ(pool.holders(src->kv_blocks[0]), 1) << "the fork let go of its shared blocks";
}

// Attention-only models can fork at any length: at a block boundary nothing is copied, inside a
// shared block that block is un-shared before the fork writes into it.
TEST(ForkSharing, AttentionOnlyForksAtAnyLengthWithoutTouchingTheSource) {
  ModelOptions mo;
  mo.kv_capacity_tokens = 512;
  mo.kv_block_tokens = 16;
  auto m = load_model(fixture("qwen3-f32"), mo);
  const KvPool& pool = m->kv_pool();
  const int V = static_cast<int>(m->config().vocab_size);
  const std::vector<int32_t> prompt = test::random_ids(37, V, 6);
  auto src = m->new_sequence();
  run(*m, *src, prompt);
  const std::vector<int32_t> src_blocks = src->kv_blocks;

  const int64_t free = pool.free_blocks();
  auto at32 = m->fork(*src, 32);
  EXPECT_EQ(pool.free_blocks(), free) << "a fork at a block boundary copies nothing";
  auto at20 = m->fork(*src, 20);
  EXPECT_EQ(pool.free_blocks(), free - 1);
  EXPECT_EQ(at20->kv_blocks[0], src_blocks[0]);
  EXPECT_NE(at20->kv_blocks[1], src_blocks[1]);

  // Each fork re-feeds the rest of the prompt and then a token: the source's next logits.
  std::vector<int32_t> rest20(prompt.begin() + 20, prompt.end()), rest32(prompt.begin() + 32,
                                                                         prompt.end());
  rest20.push_back(11);
  rest32.push_back(11);
  auto ref = m->new_sequence();
  run(*m, *ref, prompt);
  const std::vector<float> want = run(*m, *ref, {11});
  EXPECT_EQ(run(*m, *at20, rest20), want);
  EXPECT_EQ(run(*m, *at32, rest32), want);
  EXPECT_EQ(run(*m, *src, {11}), want) << "the forks' writes reached the source";
  EXPECT_EQ(std::vector<int32_t>(src->kv_blocks.begin(), src->kv_blocks.begin() + 3), src_blocks);
}

INSTANTIATE_TEST_SUITE_P(Families, ForkSharing, ::testing::Values("qwen3-f32", "qwen35-f32"));

}  // namespace
}  // namespace lockstep
