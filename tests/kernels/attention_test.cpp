// Attention invariance: a query's output does not depend on the KV block size, on the other rows
// of the call, or on the thread count; and it matches a float64 softmax-attention within rounding.
#include <gtest/gtest.h>

#include <cmath>

#include "hwy/targets.h"
#include "kernels/ops.h"
#include "kernels/ref/ref_ops.h"
#include "test_util.h"

namespace lockstep::kernels {
namespace {

// Lays out `n` positions of K and V ([n][kvh][hd]) into blocks of `bt` in a scrambled order.
struct Paged {
  std::vector<float> k, v;
  std::vector<int32_t> table;
  KvLayerView view;
  Paged(const std::vector<float>& K, const std::vector<float>& V, int64_t n, int64_t kvh,
        int64_t hd, int64_t bt) {
    const int64_t blocks = (n + bt - 1) / bt;
    for (int64_t b = 0; b < blocks; ++b) table.push_back(static_cast<int32_t>(blocks - 1 - b));
    k.assign(blocks * bt * kvh * hd, NAN);  // unwritten slots are poison: must never be read
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

TEST(Attention, InvariantToBlockSizeRowsAndThreads) {
  const int64_t n = 70, heads = 4, kvh = 2, hd = 24;
  const auto K = test::random_floats(n * kvh * hd, 1), V = test::random_floats(n * kvh * hd, 2);
  const auto q = test::random_floats(n * heads * hd, 3);
  const float scale = 1.0f / std::sqrt(float(hd));
  std::vector<float> reference;
  for (int64_t bt : {1, 3, 16, 64}) {
    Paged kv(K, V, n, kvh, hd, bt);
    // All n queries (causal: query t sees t+1 keys) in one call...
    std::vector<AttentionRow> rows;
    for (int64_t t = 0; t < n; ++t) rows.push_back({kv.table.data(), t + 1});
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      std::vector<float> all(n * heads * hd);
      attention(q.data(), n, rows, heads, kv.view, scale, all.data(), pool);
      if (reference.empty()) reference = all;
      ASSERT_TRUE(test::same_bits(all.data(), reference.data(), all.size())) << "block " << bt;
      // ...and each query alone.
      for (int64_t t = 0; t < n; t += 13) {
        std::vector<float> one(heads * hd);
        attention(q.data() + t * heads * hd, 1, {&rows[t], 1}, heads, kv.view, scale, one.data(),
                  pool);
        ASSERT_TRUE(test::same_bits(one.data(), reference.data() + t * heads * hd, heads * hd));
      }
    }
  }
  // Float64 check of the last query, head 3 (kv head 1).
  const int64_t t = n - 1, h = 3, g = 1;
  std::vector<double> s(n);
  double mx = -1e300, sum = 0;
  for (int64_t p = 0; p < n; ++p) {
    double d = 0;
    for (int64_t i = 0; i < hd; ++i) d += double(q[(t * heads + h) * hd + i]) * K[(p * kvh + g) * hd + i];
    s[p] = d * scale;
    mx = std::max(mx, s[p]);
  }
  for (auto& x : s) sum += (x = std::exp(x - mx));
  for (int64_t i = 0; i < hd; ++i) {
    double o = 0;
    for (int64_t p = 0; p < n; ++p) o += s[p] / sum * V[(p * kvh + g) * hd + i];
    EXPECT_NEAR(reference[(t * heads + h) * hd + i], o, 1e-5);
  }
}

// Every compiled target (SIMD and the scalar fallback) gives ref::attend_one's bits, for head
// sizes that are and are not multiples of the vector width and of 16.
TEST(Attention, EveryCompiledTargetMatchesTheOracle) {
  for (int64_t hd : {8, 24, 64, 128, 136}) {
    const int64_t n = 45, heads = 4, kvh = 2, bt = 16;
    const auto K = test::random_floats(n * kvh * hd, 4), V = test::random_floats(n * kvh * hd, 5);
    const auto q = test::random_floats(n * heads * hd, 6);
    const float scale = 1.0f / std::sqrt(float(hd));
    Paged kv(K, V, n, kvh, hd, bt);
    std::vector<AttentionRow> rows;
    for (int64_t t = 0; t < n; ++t) rows.push_back({kv.table.data(), t + 1});
    std::vector<float> oracle(n * heads * hd), scores(n);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t g = h / (heads / kvh);
        auto at = [&](const std::vector<float>& base, int64_t p) {
          return base.data() + (p * kvh + g) * hd;  // unpaged copy of the same values
        };
        ref::attend_one(
            q.data() + (t * heads + h) * hd, hd, t + 1, scale, [&](int64_t p) { return at(K, p); },
            [&](int64_t p) { return at(V, p); }, scores.data(),
            oracle.data() + (t * heads + h) * hd);
      }
    int tested = 0;
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      ThreadPool pool(2);
      std::vector<float> out(n * heads * hd);
      attention(q.data(), n, rows, heads, kv.view, scale, out.data(), pool);
      EXPECT_TRUE(test::same_bits(out.data(), oracle.data(), out.size()))
          << "hd " << hd << " target " << hwy::TargetName(target);
      ++tested;
    }
    hwy::SetSupportedTargetsForTest(0);
    EXPECT_GE(tested, test::kMinTargets);
  }
}

}  // namespace
}  // namespace lockstep::kernels
