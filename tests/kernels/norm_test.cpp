// rms_norm, gated_rms_norm and l2_normalize on every compiled target equal their scalar
// statements (sum of squares by ref::dot, then the per-element products in the written order)
// bit for bit, for row lengths that do and do not fill whole vectors.
#include <gtest/gtest.h>

#include <cmath>

#include "hwy/targets.h"
#include "kernels/gated_delta.h"
#include "kernels/math.h"
#include "kernels/ops.h"
#include "kernels/ref/ref_ops.h"
#include "test_util.h"

namespace lockstep::kernels {
namespace {

TEST(Norms, EveryCompiledTargetMatchesTheScalarForm) {
  for (int64_t D : {7, 16, 100, 128, 1024}) {
    const int64_t M = 5;
    const auto x = test::random_floats(M * D, 31, 3.0f), z = test::random_floats(M * D, 32, 4.0f);
    const auto w = test::random_floats(D, 33);
    const float eps = 1e-6f;
    std::vector<float> plain(M * D), centered(M * D), gated(M * D), l2 = x;
    for (int64_t m = 0; m < M; ++m) {
      const float* xr = &x[m * D];
      const float ss = ref::dot(xr, xr, D);
      const float r = 1.0f / std::sqrt(ss / static_cast<float>(D) + eps);
      const float inv = 1.0f / std::sqrt(ss + eps);
      for (int64_t d = 0; d < D; ++d) {
        plain[m * D + d] = (xr[d] * r) * w[d];
        centered[m * D + d] = (xr[d] * r) * (1.0f + w[d]);
        gated[m * D + d] = ((xr[d] * r) * w[d]) * silu_f32(z[m * D + d]);
        l2[m * D + d] = xr[d] * inv;
      }
    }
    int tested = 0;
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      const std::string where = "D " + std::to_string(D) + " target " + hwy::TargetName(target);
      std::vector<float> y(M * D);
      rms_norm(x.data(), M, D, w.data(), eps, false, y.data());
      EXPECT_TRUE(test::same_bits(y.data(), plain.data(), y.size())) << where;
      rms_norm(x.data(), M, D, w.data(), eps, true, y.data());
      EXPECT_TRUE(test::same_bits(y.data(), centered.data(), y.size())) << where;
      gated_rms_norm(x.data(), z.data(), M, D, w.data(), eps, y.data());
      EXPECT_TRUE(test::same_bits(y.data(), gated.data(), y.size())) << where;
      y = x;
      l2_normalize(y.data(), M, D, eps);
      EXPECT_TRUE(test::same_bits(y.data(), l2.data(), y.size())) << where;
      ++tested;
    }
    hwy::SetSupportedTargetsForTest(0);
    EXPECT_GE(tested, test::kMinTargets);
  }
}

}  // namespace
}  // namespace lockstep::kernels
