// Grouped query heads (GQA): the CPU attention computes the query heads that share a KV head
// together (shared key and value loads). Every group size, including ones that are not a multiple
// of the kernel's sub-group widths, must give ref::attend_one's bits per (row, head) on every
// compiled target and thread count.
#include <gtest/gtest.h>

#include <cmath>

#include "hwy/targets.h"
#include "kernels/ops.h"
#include "kernels/ref/ref_ops.h"
#include "test_util.h"

namespace lockstep::kernels {
namespace {

TEST(AttentionGroups, EveryGroupSizeMatchesTheOracle) {
  struct Shape {
    int64_t kvh, group, hd;
  };
  const Shape shapes[] = {{3, 1, 32}, {2, 2, 128}, {1, 3, 24}, {2, 4, 256},
                          {1, 5, 40}, {1, 8, 64},  {2, 7, 8}};
  const int64_t n = 37, bt = 16;
  for (const Shape& s : shapes) {
    const int64_t heads = s.kvh * s.group, kvh = s.kvh, hd = s.hd;
    const auto K = test::random_floats(n * kvh * hd, 7), V = test::random_floats(n * kvh * hd, 8);
    const auto q = test::random_floats(n * heads * hd, 9);
    const float scale = 1.0f / std::sqrt(float(hd));
    // Paged: blocks in reverse order, unwritten slots poisoned.
    const int64_t blocks = (n + bt - 1) / bt;
    std::vector<int32_t> table;
    for (int64_t b = 0; b < blocks; ++b) table.push_back(static_cast<int32_t>(blocks - 1 - b));
    std::vector<float> pk(blocks * bt * kvh * hd, NAN), pv = pk;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t i = 0; i < kvh * hd; ++i) {
        const int64_t dst = (table[p / bt] * bt + p % bt) * kvh * hd + i;
        pk[dst] = K[p * kvh * hd + i];
        pv[dst] = V[p * kvh * hd + i];
      }
    const KvLayerView view{pk.data(), pv.data(), bt, kvh, hd};
    std::vector<AttentionRow> rows;
    for (int64_t t = 0; t < n; ++t) rows.push_back({table.data(), t + 1});
    std::vector<float> oracle(n * heads * hd), scores(n);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t g = h / s.group;
        auto at = [&](const std::vector<float>& base, int64_t p) {
          return base.data() + (p * kvh + g) * hd;
        };
        ref::attend_one(
            q.data() + (t * heads + h) * hd, hd, t + 1, scale, [&](int64_t p) { return at(K, p); },
            [&](int64_t p) { return at(V, p); }, scores.data(),
            oracle.data() + (t * heads + h) * hd);
      }
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> out(n * heads * hd);
        attention(q.data(), n, rows, heads, view, scale, out.data(), pool);
        EXPECT_TRUE(test::same_bits(out.data(), oracle.data(), out.size()))
            << "group " << s.group << " hd " << hd << " threads " << threads << " target "
            << hwy::TargetName(target);
        // One row alone (decode): the last.
        std::vector<float> one(heads * hd);
        attention(q.data() + (n - 1) * heads * hd, 1, {&rows[n - 1], 1}, heads, view, scale,
                  one.data(), pool);
        EXPECT_TRUE(test::same_bits(one.data(), oracle.data() + (n - 1) * heads * hd, heads * hd));
      }
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

}  // namespace
}  // namespace lockstep::kernels
