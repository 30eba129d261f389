// silu_mul on every compiled target equals the scalar statement silu_f32(g) * u bit for bit,
// including exp_f32's edge cases (overflow, underflow to subnormal and zero, NaN, infinities) and
// lengths that leave a scalar tail.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "hwy/targets.h"
#include "kernels/math.h"
#include "kernels/ops.h"
#include "test_util.h"

namespace lockstep::kernels {
namespace {

TEST(SiluMul, EveryCompiledTargetMatchesTheScalarForm) {
  std::vector<float> g = test::random_floats(1000, 21, 8.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 88.0f, 88.8f, 89.0f, 100.0f, 103.9f, 104.0f, 150.0f, -88.0f,
                  -88.8f, -100.0f, -103.97f, -104.0f, -150.0f, inf, -inf,
                  std::numeric_limits<float>::quiet_NaN(), 1e-30f, -1e-30f, 87.3f, -87.3f})
    g.push_back(v);
  for (int i = -2000; i <= 2000; ++i) g.push_back(i * 0.0625f);  // exact halves and ties of n
  const std::vector<float> u = test::random_floats(g.size(), 22);
  std::vector<float> expect(g.size());
  for (size_t i = 0; i < g.size(); ++i) expect[i] = silu_f32(g[i]) * u[i];
  int tested = 0;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (size_t n : {g.size(), size_t{1}, size_t{7}, size_t{17}, size_t{33}}) {
      std::vector<float> out(n);
      silu_mul(g.data() + g.size() - n, u.data() + g.size() - n, out.data(),
               static_cast<int64_t>(n));
      EXPECT_TRUE(test::same_bits(out.data(), expect.data() + g.size() - n, n))
          << "n " << n << " target " << hwy::TargetName(target);
    }
    ++tested;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 2);
}

}  // namespace
}  // namespace lockstep::kernels
