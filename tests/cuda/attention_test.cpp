// CUDA attention: a row's output bits do not depend on T, on the other rows, on max_keys, on the
// KV block size or on which launch shape ran (split chunks + merge for few rows, in-block walk for
// many); accuracy against the CPU kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "cuda_test_util.h"

namespace lockstep::kernels::cuda::test {
namespace {

constexpr int64_t kLen = 1300;  // positions of the one sequence

struct Shape {
  int64_t n_heads, n_kv_heads, head_dim;
};

// One sequence's keys and values, [position][kv head][head_dim], laid out in a paged cache of
// `bt`-position blocks in a scrambled block order.
struct PagedCache {
  int64_t bt, n_blocks;
  std::vector<int32_t> table;   // logical block -> physical block
  std::vector<int32_t> table2;  // a second copy of the same positions in other blocks
  std::vector<float> k, v;     // host copies, [n_blocks * bt][kv_dim]
  DeviceBuffer<float> dk, dv;
  DeviceBuffer<int32_t> dtable;

  PagedCache(const std::vector<float>& keys, const std::vector<float>& values, int64_t kv_dim,
             int64_t block_tokens)
      : bt(block_tokens) {
    const int64_t used = (kLen + bt - 1) / bt;
    n_blocks = 2 * used + 3;
    table.resize(used);
    table2.resize(used);
    std::vector<int32_t> phys(n_blocks);
    std::iota(phys.begin(), phys.end(), 0);
    std::mt19937 rng(static_cast<uint32_t>(block_tokens));
    std::shuffle(phys.begin(), phys.end(), rng);
    for (int64_t j = 0; j < used; ++j) table[j] = phys[j], table2[j] = phys[used + j];
    k = random_floats(n_blocks * bt * kv_dim, 999);  // garbage in unused slots
    v = random_floats(n_blocks * bt * kv_dim, 998);
    for (int64_t p = 0; p < kLen; ++p)
      for (const auto* tb : {&table, &table2}) {
        const int64_t slot = (*tb)[p / bt] * bt + p % bt;
        std::copy(keys.begin() + p * kv_dim, keys.begin() + (p + 1) * kv_dim,
                  k.begin() + slot * kv_dim);
        std::copy(values.begin() + p * kv_dim, values.begin() + (p + 1) * kv_dim,
                  v.begin() + slot * kv_dim);
      }
    dk = DeviceBuffer<float>(k);
    dv = DeviceBuffer<float>(v);
    dtable = DeviceBuffer<int32_t>(table);
  }
};

class AttentionTest : public CudaTest, public ::testing::WithParamInterface<Shape> {
 protected:
  // Runs rows (query index into qs, n_keys) in one call; returns [rows][n_heads][hd].
  std::vector<float> run(const Shape& s, const PagedCache& c, const std::vector<float>& qs,
                         const std::vector<int64_t>& qi, const std::vector<int32_t>& nk,
                         int64_t max_keys, bool mixed_tables = false) {
    const int64_t T = static_cast<int64_t>(qi.size()), row = s.n_heads * s.head_dim;
    std::vector<float> q(T * row);
    for (int64_t t = 0; t < T; ++t)
      std::copy(qs.begin() + qi[t] * row, qs.begin() + (qi[t] + 1) * row, q.begin() + t * row);
    const int64_t stride = static_cast<int64_t>(c.table.size());
    std::vector<int32_t> tables(T * stride);
    // mixed_tables: every third row reads the second copy (rows of other sequences), so rows
    // of one in-block launch do not share their keys' locations.
    for (int64_t t = 0; t < T; ++t) {
      const auto& tb = mixed_tables && t % 3 == 1 ? c.table2 : c.table;
      std::copy(tb.begin(), tb.end(), tables.begin() + t * stride);
    }
    DeviceBuffer<float> dq(q), dout(T * row);
    DeviceBuffer<int32_t> dtables(tables), dnk(nk);
    KvLayerView kv;
    kv.k = c.dk.get();
    kv.v = c.dv.get();
    kv.block_tokens = c.bt;
    kv.n_kv_heads = s.n_kv_heads;
    kv.head_dim = s.head_dim;
    attention(dq.get(), T, dtables.get(), stride, dnk.get(), max_keys, s.n_heads, kv,
              1.0f / std::sqrt(static_cast<float>(s.head_dim)), dout.get());
    return dout.to_host();
  }
};

TEST_P(AttentionTest, RowsBitwiseInvariantAndAccurate) {
  const Shape s = GetParam();
  const int64_t kv_dim = s.n_kv_heads * s.head_dim, row = s.n_heads * s.head_dim;
  const auto keys = random_floats(kLen * kv_dim, 1, -2.0f, 2.0f);
  const auto values = random_floats(kLen * kv_dim, 2);
  const int64_t NQ = 160;
  const auto qs = random_floats(NQ * row, 3, -2.0f, 2.0f);
  std::vector<int32_t> lens(NQ);
  const int32_t fixed[] = {1, 2, 16, 17, 255, 256, 257, 511, 512, 513, 700, 1024, 1299, 1300};
  for (int64_t i = 0; i < NQ; ++i)
    lens[i] = i < 14 ? fixed[i] : static_cast<int32_t>(1 + (i * 7919) % kLen);

  PagedCache c16(keys, values, kv_dim, 16), c32(keys, values, kv_dim, 32), c64(keys, values, kv_dim, 64);

  // Reference: each query alone (T = 1), block size 16, max_keys = its own n_keys.
  std::vector<float> ref(NQ * row);
  for (int64_t i = 0; i < NQ; ++i) {
    const auto o = run(s, c16, qs, {i}, {lens[i]}, lens[i]);
    std::copy(o.begin(), o.end(), ref.begin() + i * row);
  }

  auto check = [&](const PagedCache& c, const std::vector<int64_t>& qi, int64_t max_keys,
                   const char* what, bool mixed = false) {
    std::vector<int32_t> nk;
    for (int64_t i : qi) nk.push_back(lens[i]);
    const auto out = run(s, c, qs, qi, nk, max_keys, mixed);
    for (size_t t = 0; t < qi.size(); ++t)
      ASSERT_TRUE(same_bits(out.data() + t * row, ref.data() + qi[t] * row, row))
          << what << ": row " << t << " (query " << qi[t] << ", n_keys " << lens[qi[t]]
          << ", block " << c.bt << ") differs from its T=1 result";
  };
  for (const PagedCache* c : {&c16, &c32, &c64}) {
    // Alone with a larger launch bound.
    for (int64_t i : {0, 5, 9, 12, 13}) check(*c, {i}, kLen + 500, "T=1, max_keys larger");
    // Small batches (split launch) in different orders.
    check(*c, {3, 9, 0, 13}, kLen, "T=4");
    check(*c, {13, 0, 9, 3, 7, 1}, 2048, "T=6");
    // Many rows (in-block launch): all queries, then reversed.
    std::vector<int64_t> all(NQ);
    std::iota(all.begin(), all.end(), 0);
    check(*c, all, kLen, "T=160");
    std::reverse(all.begin(), all.end());
    check(*c, all, kLen + 256, "T=160 reversed");
    // Rows per in-block launch block (1 = one row per block; 0 = as many as fit), shared and
    // mixed block tables, and a prefill-like run of consecutive lengths.
    struct Reset {
      ~Reset() { testing::set_attention_rows_override(0); }
    } reset;
    for (int rows_cap : {1, 2, 3, 0}) {
      testing::set_attention_rows_override(rows_cap);
      check(*c, all, kLen, "T=160 rows cap");
      check(*c, all, kLen, "T=160 rows cap, mixed tables", true);
    }
    testing::set_attention_rows_override(0);
    std::vector<int64_t> sorted(all);
    std::sort(sorted.begin(), sorted.end(), [&](int64_t a, int64_t b) { return lens[a] < lens[b]; });
    check(*c, sorted, kLen, "T=160 by length");
  }

  // Accuracy against the CPU kernel.
  ThreadPool pool(2);
  std::vector<AttentionRow> rows(NQ);
  for (int64_t i = 0; i < NQ; ++i) rows[i] = AttentionRow{c16.table.data(), lens[i]};
  KvLayerView hkv;
  hkv.k = c16.k.data();
  hkv.v = c16.v.data();
  hkv.block_tokens = 16;
  hkv.n_kv_heads = s.n_kv_heads;
  hkv.head_dim = s.head_dim;
  std::vector<float> cpu(NQ * row);
  kernels::attention(qs.data(), NQ, rows, s.n_heads, hkv, 1.0f / std::sqrt(static_cast<float>(s.head_dim)),
                     cpu.data(), pool);
  double worst = 0;
  for (size_t i = 0; i < cpu.size(); ++i) worst = std::max(worst, std::fabs(double(cpu[i]) - ref[i]));
  EXPECT_LT(worst, 2e-5) << "largest |GPU - CPU| (values in [-1, 1])";
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(Shape{8, 2, 128}, Shape{4, 1, 256}, Shape{6, 6, 64},
                                           Shape{32, 2, 128}));

TEST_F(CudaTest, AttentionZeroKeysGivesZeros) {
  const int64_t hd = 128;
  DeviceBuffer<float> dq(random_floats(hd, 5)), dout(hd), dk(16 * hd), dv(16 * hd);
  DeviceBuffer<int32_t> dtable(std::vector<int32_t>{0}), dnk(std::vector<int32_t>{0});
  KvLayerView kv;
  kv.k = dk.get();
  kv.v = dv.get();
  kv.block_tokens = 16;
  kv.n_kv_heads = 1;
  kv.head_dim = hd;
  attention(dq.get(), 1, dtable.get(), 1, dnk.get(), 0, 1, kv, 0.1f, dout.get());
  for (float x : dout.to_host()) EXPECT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
