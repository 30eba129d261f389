// Sliding-window attention (AttentionRow::first_key): a windowed row equals the oracle over its
// own keys on every compiled target, for any block size, thread count and batch composition; keys
// below the window are never read; and a window covering every key is full attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "hwy/targets.h"
#include "kernels/ops.h"
#include "kernels/ref/ref_ops.h"
#include "test_util.h"

namespace lockstep::kernels {
namespace {

// K and V [n][kvh][hd] laid out in blocks of `bt`, blocks in reverse order.
struct Paged {
  std::vector<float> k, v;
  std::vector<int32_t> table;
  KvLayerView view;
  Paged(const std::vector<float>& K, const std::vector<float>& V, int64_t n, int64_t kvh,
        int64_t hd, int64_t bt) {
    const int64_t blocks = (n + bt - 1) / bt;
    for (int64_t b = 0; b < blocks; ++b) table.push_back(static_cast<int32_t>(blocks - 1 - b));
    k.assign(blocks * bt * kvh * hd, NAN);
    v = k;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t i = 0; i < kvh * hd; ++i) {
        const int64_t dst = (table[p / bt] * bt + p % bt) * kvh * hd + i;
        k[dst] = K[p * kvh * hd + i];
        v[dst] = V[p * kvh * hd + i];
      }
    view = {k.data(), v.data(), bt, kvh, hd};
  }
};

constexpr int64_t kN = 53, kHeads = 4, kKvh = 2;

// Rows of positions 0..n-1, each seeing (p - window, p].
std::vector<AttentionRow> windowed_rows(const Paged& kv, int64_t n, int64_t window) {
  std::vector<AttentionRow> rows;
  for (int64_t t = 0; t < n; ++t)
    rows.push_back({kv.table.data(), t + 1, std::max<int64_t>(0, t + 1 - window)});
  return rows;
}

// ref::attend_one over each row's window, on the unpaged values.
std::vector<float> oracle(const std::vector<float>& q, const std::vector<float>& K,
                          const std::vector<float>& V, int64_t hd, int64_t window, float scale) {
  std::vector<float> out(kN * kHeads * hd), scores(kN);
  for (int64_t t = 0; t < kN; ++t) {
    const int64_t first = std::max<int64_t>(0, t + 1 - window);
    for (int64_t h = 0; h < kHeads; ++h) {
      const int64_t g = h / (kHeads / kKvh);
      auto at = [&](const std::vector<float>& base, int64_t j) {
        return base.data() + ((first + j) * kKvh + g) * hd;
      };
      ref::attend_one(
          q.data() + (t * kHeads + h) * hd, hd, t + 1 - first, scale,
          [&](int64_t j) { return at(K, j); }, [&](int64_t j) { return at(V, j); },
          scores.data(), out.data() + (t * kHeads + h) * hd);
    }
  }
  return out;
}

TEST(AttentionWindow, EveryTargetBlockSizeAndThreadCountMatchesTheOracle) {
  int tested = 0;
  for (int64_t hd : {16, 24, 128}) {
    const auto K = test::random_floats(kN * kKvh * hd, 31), V = test::random_floats(kN * kKvh * hd, 32);
    const auto q = test::random_floats(kN * kHeads * hd, 33);
    const float scale = 0.2f;
    for (int64_t window : {1, 5, 16, 17}) {
      const auto want = oracle(q, K, V, hd, window, scale);
      for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        for (int64_t bt : {1, 4, 16}) {
          Paged kv(K, V, kN, kKvh, hd, bt);
          const auto rows = windowed_rows(kv, kN, window);
          for (int threads : {1, 2}) {
            ThreadPool pool(threads);
            std::vector<float> out(kN * kHeads * hd);
            attention(q.data(), kN, rows, kHeads, kv.view, scale, out.data(), pool);
            EXPECT_TRUE(test::same_bits(out.data(), want.data(), out.size()))
                << "hd " << hd << " window " << window << " block " << bt << " threads "
                << threads << " target " << hwy::TargetName(target);
          }
          // One row alone, and a window-crossing row beside rows of other windows: same bits.
          ThreadPool pool(2);
          for (int64_t t : {int64_t{0}, window, kN - 1}) {
            if (t >= kN) continue;
            std::vector<float> one(kHeads * hd);
            attention(q.data() + t * kHeads * hd, 1, {&rows[t], 1}, kHeads, kv.view, scale,
                      one.data(), pool);
            EXPECT_TRUE(test::same_bits(one.data(), want.data() + t * kHeads * hd, one.size()));
          }
          ++tested;
        }
      }
      hwy::SetSupportedTargetsForTest(0);
    }
  }
  EXPECT_GE(tested, test::kMinTargets * 3 * 4 * 3);
}

TEST(AttentionWindow, KeysBelowTheWindowAreNeverRead) {
  const int64_t hd = 24, window = 7, t = kN - 1, first = t + 1 - window;
  auto K = test::random_floats(kN * kKvh * hd, 41), V = test::random_floats(kN * kKvh * hd, 42);
  const auto q = test::random_floats(kN * kHeads * hd, 43);
  const auto want = oracle(q, K, V, hd, window, 0.3f);
  for (int64_t i = 0; i < first * kKvh * hd; ++i) K[i] = V[i] = NAN;  // poison
  Paged kv(K, V, kN, kKvh, hd, 4);
  const AttentionRow row{kv.table.data(), t + 1, first};
  ThreadPool pool(1);
  std::vector<float> out(kHeads * hd);
  attention(q.data() + t * kHeads * hd, 1, {&row, 1}, kHeads, kv.view, 0.3f, out.data(), pool);
  EXPECT_TRUE(test::same_bits(out.data(), want.data() + t * kHeads * hd, out.size()));
}

TEST(AttentionWindow, AWindowOverEveryKeyIsFullAttention) {
  const int64_t hd = 16;
  const auto K = test::random_floats(kN * kKvh * hd, 51), V = test::random_floats(kN * kKvh * hd, 52);
  const auto q = test::random_floats(kN * kHeads * hd, 53);
  Paged kv(K, V, kN, kKvh, hd, 16);
  std::vector<AttentionRow> full;
  for (int64_t p = 0; p < kN; ++p) full.push_back({kv.table.data(), p + 1});
  ThreadPool pool(2);
  std::vector<float> a(kN * kHeads * hd), b(a.size());
  attention(q.data(), kN, full, kHeads, kv.view, 0.25f, a.data(), pool);
  attention(q.data(), kN, windowed_rows(kv, kN, kN), kHeads, kv.view, 0.25f, b.data(), pool);
  EXPECT_TRUE(test::same_bits(a.data(), b.data(), a.size()));
  // And a real window changes the rows past it (the test above is not vacuous).
  attention(q.data(), kN, windowed_rows(kv, kN, 5), kHeads, kv.view, 0.25f, b.data(), pool);
  EXPECT_TRUE(test::same_bits(a.data(), b.data(), 5 * kHeads * hd));
  EXPECT_FALSE(test::same_bits(a.data() + 5 * kHeads * hd, b.data() + 5 * kHeads * hd,
                               (kN - 5) * kHeads * hd));
}

}  // namespace
}  // namespace lockstep::kernels
