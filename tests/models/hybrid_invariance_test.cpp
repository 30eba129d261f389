// Qwen3.5 / Qwen3-Next invariance: the recurrent state and logits after N tokens are bitwise the
// same whether the tokens came as one chunk, one at a time or in any split, beside other
// sequences, with 1 or 2 threads; clone() round-trips; truncate after a keep_rollback forward
// equals having fed only the kept tokens; truncate below the floor is an error; verify blocks of
// several sequences in one call keep reusing each sequence's rollback buffers.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "core/error.h"
#include "model_test_util.h"
#include "models/forward_common.h"
#include "models/hybrid_state.h"
#include "models/model.h"

namespace lockstep {
namespace {

using test::logits_in_pieces;
using test::random_ids;

std::string checkpoint(const std::string& name) {
  if (name.rfind("tiny-", 0) == 0) return test::tiny_checkpoint(name);
  return std::string(LOCKSTEP_SOURCE_DIR) + "/tests/fixtures/" + name;
}

const HybridState& hybrid(const SequenceState& s) {
  return dynamic_cast<const HybridState&>(*s.recurrent);
}

// Bitwise equality of two CPU-backend (host memory) arrays.
bool same_bits(const kernels::Floats& a, const kernels::Floats& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.size()) * sizeof(float)) == 0;
}

bool same_state(const SequenceState& a, const SequenceState& b) {
  const auto &x = hybrid(a).layers, &y = hybrid(b).layers;
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!same_bits(x[i].conv, y[i].conv) || !same_bits(x[i].delta, y[i].delta)) return false;
  return true;
}

struct Fed {
  std::unique_ptr<SequenceState> seq;
  std::vector<float> logits;
};

// All-position logits of `ids` fed in pieces of the given sizes (cycled).
Fed feed(Model& m, const std::vector<int32_t>& ids, const std::vector<int>& pieces) {
  Fed f{m.new_sequence(), {}};
  size_t at = 0, k = 0;
  while (at < ids.size()) {
    const size_t n = std::min<size_t>(pieces[k++ % pieces.size()], ids.size() - at);
    ForwardItem it{f.seq.get(), {ids.data() + at, n}, ForwardItem::Logits::All};
    auto r = m.forward({&it, 1});
    f.logits.insert(f.logits.end(), r.logits.begin(), r.logits.end());
    at += n;
  }
  return f;
}

class HybridInvariance : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridInvariance, ChunkingBatchingAndThreads) {
  ThreadPool one(1), two(2);
  ModelOptions o1, o2;
  o1.pool = &one;
  o2.pool = &two;
  o2.kv_block_tokens = 3;
  auto m = load_model(checkpoint(GetParam()), o1);
  auto m2 = load_model(checkpoint(GetParam()), o2);
  ASSERT_GT(m->state_bytes_per_sequence(), 0u);
  const int V = static_cast<int>(m->config().vocab_size);
  const auto ids = random_ids(41, V, 5);
  const Fed whole = feed(*m, ids, {41});
  ASSERT_EQ(whole.logits.size(), ids.size() * V);
  for (const auto& pieces : std::vector<std::vector<int>>{{1}, {5, 2, 11}, {16}, {3, 1, 30}}) {
    const Fed f = feed(*m, ids, pieces);
    EXPECT_EQ(whole.logits, f.logits) << "pieces " << pieces[0];
    EXPECT_TRUE(same_state(*whole.seq, *f.seq)) << "pieces " << pieces[0];
  }
  const Fed t2 = feed(*m2, ids, {7});
  EXPECT_EQ(whole.logits, t2.logits);
  EXPECT_TRUE(same_state(*whole.seq, *t2.seq));

  // Beside two other sequences in one call (one mid-way through its own prompt).
  auto s0 = m2->new_sequence(), s1 = m2->new_sequence(), s2 = m2->new_sequence();
  const auto other1 = random_ids(9, V, 6), other2 = random_ids(20, V, 7);
  ForwardItem pre{s2.get(), {other2.data(), 13}, ForwardItem::Logits::None};
  m2->forward({&pre, 1});
  ForwardItem items[3] = {{s1.get(), other1, ForwardItem::Logits::Last},
                          {s0.get(), ids, ForwardItem::Logits::All},
                          {s2.get(), {other2.data() + 13, 7}, ForwardItem::Logits::All}};
  auto r = m2->forward(items);
  ASSERT_EQ(r.rows, 1 + 41 + 7);
  EXPECT_EQ(0, std::memcmp(&r.logits[r.first_row[1] * V], whole.logits.data(),
                           whole.logits.size() * 4));
  EXPECT_TRUE(same_state(*whole.seq, *s0));
  const Fed other_alone = feed(*m, other2, {20});
  EXPECT_TRUE(same_state(*other_alone.seq, *s2));
}

TEST_P(HybridInvariance, SnapshotRestoreRoundTripsBitwise) {
  auto m = load_model(checkpoint(GetParam()));
  const int V = static_cast<int>(m->config().vocab_size);
  const auto ids = random_ids(30, V, 11);
  const Fed ref = feed(*m, ids, {30});
  Fed f = feed(*m, {ids.begin(), ids.begin() + 20}, {20});
  // Snapshot at 20, run a detour (no keep_rollback), restore: continuing gives the bits of
  // never having left.
  const auto snapshot = f.seq->recurrent->clone();
  EXPECT_EQ(snapshot->bytes(), m->state_bytes_per_sequence());
  const auto detour = random_ids(6, V, 12);
  ForwardItem d{f.seq.get(), detour, ForwardItem::Logits::None};
  m->forward({&d, 1});
  EXPECT_THROW(m->truncate(*f.seq, 20), Error);  // the detour kept no rollback
  ForwardItem stale{f.seq.get(), detour, ForwardItem::Logits::None};
  f.seq->recurrent = snapshot->clone();
  EXPECT_THROW(m->forward({&stale, 1}), Error);  // state at 20, sequence at 26: refused
  m->truncate(*f.seq, 20);
  EXPECT_TRUE(same_state(*f.seq, *feed(*m, {ids.begin(), ids.begin() + 20}, {20}).seq));
  ForwardItem rest{f.seq.get(), {ids.data() + 20, 10}, ForwardItem::Logits::All};
  const auto r = m->forward({&rest, 1});
  EXPECT_EQ(0, std::memcmp(r.logits.data(), &ref.logits[20 * V], 10 * V * 4));
  EXPECT_TRUE(same_state(*ref.seq, *f.seq));
}

TEST_P(HybridInvariance, TruncateAfterKeepRollbackEqualsFeedingOnlyKeptTokens) {
  ThreadPool two(2);
  ModelOptions o;
  o.pool = &two;
  auto m = load_model(checkpoint(GetParam()), o);
  const int V = static_cast<int>(m->config().vocab_size);
  const auto ids = random_ids(24, V, 21);
  const Fed ref = feed(*m, ids, {24});
  for (int keep = 0; keep <= 6; ++keep) {
    // Prompt of 16, then a "verify block" of 6 tokens whose last 6 - keep are rejected drafts.
    Fed f = feed(*m, {ids.begin(), ids.begin() + 16}, {16});
    std::vector<int32_t> block(ids.begin() + 16, ids.begin() + 22);
    for (int i = keep; i < 6; ++i) block[i] = (block[i] + 1 + i) % V;
    ForwardItem v{f.seq.get(), block, ForwardItem::Logits::All, /*keep_rollback=*/true};
    m->forward({&v, 1});
    EXPECT_EQ(f.seq->rollback_floor, 16);
    EXPECT_THROW(m->truncate(*f.seq, 15), Error);
    m->truncate(*f.seq, 16 + keep);
    EXPECT_TRUE(same_state(*f.seq, *feed(*m, {ids.begin(), ids.begin() + 16 + keep}, {30}).seq))
        << "keep " << keep;
    // Continue with the true tokens: logits are those of the straight run.
    ForwardItem rest{f.seq.get(), {ids.data() + 16 + keep, static_cast<size_t>(8 - keep)},
                     ForwardItem::Logits::All};
    const auto r = m->forward({&rest, 1});
    EXPECT_EQ(0, std::memcmp(r.logits.data(), &ref.logits[(16 + keep) * V], (8 - keep) * V * 4))
        << "keep " << keep;
    EXPECT_TRUE(same_state(*ref.seq, *f.seq)) << "keep " << keep;
  }
  // Truncating twice inside one block (down to 18, then to 17) also works.
  Fed f = feed(*m, {ids.begin(), ids.begin() + 16}, {16});
  ForwardItem v{f.seq.get(), {ids.data() + 16, 6}, ForwardItem::Logits::All, true};
  m->forward({&v, 1});
  m->truncate(*f.seq, 18);
  m->truncate(*f.seq, 17);
  EXPECT_TRUE(same_state(*f.seq, *feed(*m, {ids.begin(), ids.begin() + 17}, {17}).seq));
}

// Verify blocks of two sequences in one call, the sequences taking turns in the call's first slot:
// each round's truncate gives the state of feeding only the kept tokens, and the rollback buffers
// are made once and then only written (a recorded CUDA step may not allocate what outlives it).
TEST_P(HybridInvariance, BatchedVerifyBlocksReuseTheirRollbackBuffers) {
  auto m = load_model(checkpoint(GetParam()));
  const int V = static_cast<int>(m->config().vocab_size);
  std::vector<int32_t> history[2] = {random_ids(16, V, 31), random_ids(11, V, 32)};
  Fed f[2] = {feed(*m, history[0], {16}), feed(*m, history[1], {11})};
  const float *floor_at[2] = {}, *log_at[2] = {};
  for (int round = 0; round < 5; ++round) {
    std::vector<int32_t> block[2] = {random_ids(5, V, 40 + 2 * round),
                                     random_ids(5, V, 41 + 2 * round)};
    const int a = round % 2, b = 1 - a;
    ForwardItem items[2] = {{f[a].seq.get(), block[a], ForwardItem::Logits::All, true},
                            {f[b].seq.get(), block[b], ForwardItem::Logits::All, true}};
    m->forward(items);
    for (int s = 0; s < 2; ++s) {
      const HybridState& st = hybrid(*f[s].seq);
      EXPECT_EQ(f[s].seq->rollback_floor, static_cast<int64_t>(history[s].size()));
      if (round > 0) {
        EXPECT_EQ(floor_at[s], st.floor.front().delta.data()) << "round " << round;
        EXPECT_EQ(log_at[s], st.log.front().data()) << "round " << round;
      }
      floor_at[s] = st.floor.front().delta.data();
      log_at[s] = st.log.front().data();
      const int keep = (2 * round + 3 * s) % 6;  // 0..5 of the block
      history[s].insert(history[s].end(), block[s].begin(), block[s].begin() + keep);
      m->truncate(*f[s].seq, static_cast<int64_t>(history[s].size()));
      EXPECT_TRUE(same_state(*f[s].seq, *feed(*m, history[s], {64}).seq))
          << "round " << round << " sequence " << s << " keep " << keep;
    }
  }
  // A plain step drops the floor but keeps the buffers; truncating into it is refused.
  ForwardItem plain{f[0].seq.get(), {history[0].data(), 1}, ForwardItem::Logits::Last};
  m->forward({&plain, 1});
  EXPECT_EQ(floor_at[0], hybrid(*f[0].seq).floor.front().delta.data());
  EXPECT_THROW(m->truncate(*f[0].seq, static_cast<int64_t>(history[0].size())), Error);
}

// A verify block's key says it keeps rollback data (the hybrid forward then runs more ops);
// nothing of the sequence itself is in it.
TEST(GraphKey, MarksItemsThatKeepRollbackData) {
  SequenceState a(nullptr), b(nullptr);
  a.length = 3;
  b.length = 200;
  const std::vector<int32_t> t = {1, 2};
  const ForwardItem plain{&a, t, ForwardItem::Logits::All},
      verify{&a, t, ForwardItem::Logits::All, true}, other{&b, t, ForwardItem::Logits::All, true};
  EXPECT_EQ(graph_key("hybrid", {&plain, 1}, 64), "hybrid|2a|k1");
  EXPECT_EQ(graph_key("hybrid", {&verify, 1}, 64), "hybrid|2ar|k1");
  EXPECT_EQ(graph_key("hybrid", {&other, 1}, 64), "hybrid|2ar|k1");
}

// Batched decode of up to kRecordedMaxTokens one-token items is recorded; one more token, a
// caller's lower limit (MoE routed on the device) or more logits than the step arena holds is not.
TEST(GraphKey, LimitsWhatIsRecorded) {
  std::vector<std::unique_ptr<SequenceState>> seqs;
  const std::vector<int32_t> one = {7};
  std::vector<ForwardItem> items;
  for (int64_t i = 0; i <= kRecordedMaxTokens; ++i) {
    seqs.push_back(std::make_unique<SequenceState>(nullptr));
    seqs.back()->length = 40;
    items.push_back({seqs.back().get(), one, ForwardItem::Logits::Last});
  }
  const std::span<const ForwardItem> all(items), most = all.first(kRecordedMaxTokens);
  EXPECT_NE(graph_key("dense", most, 151936), "");
  EXPECT_EQ(graph_key("dense", all, 151936), "");
  EXPECT_EQ(graph_key("dense", most, 151936, 64), "");
  EXPECT_NE(graph_key("dense", most.first(64), 151936, 64), "");
  const int64_t vocab_over = kRecordedMaxLogitBytes / 4 / kRecordedMaxTokens + 1;
  EXPECT_EQ(graph_key("dense", most, vocab_over), "");
  EXPECT_NE(graph_key("dense", most.first(kRecordedMaxTokens / 2), vocab_over), "");
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, HybridInvariance,
                         ::testing::Values("tiny-qwen3.5", "qwen35-f32", "qwen3next-f32",
                                           "tiny-qwen3.5-moe", "qwen35moe-f32",
                                           "qwen3next-moe-f32"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace lockstep
