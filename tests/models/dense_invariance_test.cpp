// Model-level invariance: a sequence's logits are bitwise the same whether its tokens arrive in
// one forward, one at a time, in chunks, beside other sequences, with any thread count or KV
// block size, and after truncating and re-feeding.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "model_test_util.h"
#include "models/model.h"

namespace lockstep {
namespace {

using test::logits_in_pieces;
using test::random_ids;

class DenseInvariance : public ::testing::TestWithParam<std::string> {};

TEST_P(DenseInvariance, LogitsIndependentOfChunkingBatchThreadsAndBlocks) {
  const std::string dir = test::tiny_checkpoint(GetParam());
  ThreadPool one(1), two(2);
  ModelOptions o1;
  o1.pool = &one;
  o1.kv_block_tokens = 16;
  auto m = load_model(dir, o1);
  const int V = static_cast<int>(m->config().vocab_size);
  const auto ids = random_ids(37, V, 5);
  const auto whole = logits_in_pieces(*m, ids, {37});
  ASSERT_EQ(whole.size(), ids.size() * V);
  EXPECT_EQ(whole, logits_in_pieces(*m, ids, {1}));
  EXPECT_EQ(whole, logits_in_pieces(*m, ids, {5, 2, 11}));

  ModelOptions o2;
  o2.pool = &two;
  o2.kv_block_tokens = 3;
  auto m2 = load_model(dir, o2);
  EXPECT_EQ(whole, logits_in_pieces(*m2, ids, {7}));

  // Batched beside two other sequences of different lengths, in one forward call.
  auto s0 = m2->new_sequence(), s1 = m2->new_sequence(), s2 = m2->new_sequence();
  const auto other1 = random_ids(9, V, 6), other2 = random_ids(20, V, 7);
  ForwardItem pre{s2.get(), {other2.data(), 13}, ForwardItem::Logits::None};
  m2->forward({&pre, 1});
  ForwardItem items[3] = {{s1.get(), other1, ForwardItem::Logits::Last},
                          {s0.get(), ids, ForwardItem::Logits::All},
                          {s2.get(), {other2.data() + 13, 7}, ForwardItem::Logits::All}};
  auto r = m2->forward(items);
  ASSERT_EQ(r.rows, 1 + 37 + 7);
  EXPECT_EQ(0, std::memcmp(&r.logits[r.first_row[1] * V], whole.data(), whole.size() * 4));

  // Truncate back and re-feed a different continuation, then the original: same bits.
  auto seq = m->new_sequence();
  ForwardItem a{seq.get(), {ids.data(), 30}, ForwardItem::Logits::None};
  m->forward({&a, 1});
  m->truncate(*seq, 20);
  const auto detour = random_ids(5, V, 8);
  ForwardItem b{seq.get(), detour, ForwardItem::Logits::None};
  m->forward({&b, 1});
  m->truncate(*seq, 20);
  ForwardItem c{seq.get(), {ids.data() + 20, 17}, ForwardItem::Logits::All};
  auto rc = m->forward({&c, 1});
  EXPECT_EQ(0, std::memcmp(rc.logits.data(), &whole[20 * V], 17 * V * 4));
}

INSTANTIATE_TEST_SUITE_P(Families, DenseInvariance,
                         ::testing::Values("tiny-llama", "tiny-qwen3", "tiny-qwen3-moe",
                                           "tiny-mistral"));

}  // namespace
}  // namespace lockstep
