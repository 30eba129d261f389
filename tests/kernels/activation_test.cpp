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
  EXPECT_GE(tested, test::kMinTargets);
}

}  // namespace
}  // namespace lockstep::kernels

namespace lockstep::kernels {
namespace {

// gelu_tanh_mul on every compiled target equals gelu_tanh_f32(g) * u bit for bit, and
// gelu_tanh_f32 is PyTorch's gelu(x, approximate="tanh") to within float rounding.
TEST(GeluTanhMul, EveryCompiledTargetMatchesTheScalarForm) {
  std::vector<float> g = test::random_floats(1000, 23, 4.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 10.0f, -10.0f, 30.0f, -30.0f, 1e4f, -1e4f, 1e20f, -1e20f, inf, -inf,
                  std::numeric_limits<float>::quiet_NaN(), 1e-30f, -1e-30f})
    g.push_back(v);
  const std::vector<float> u = test::random_floats(g.size(), 24);
  std::vector<float> expect(g.size());
  for (size_t i = 0; i < g.size(); ++i) expect[i] = gelu_tanh_f32(g[i]) * u[i];
  int tested = 0;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (size_t n : {g.size(), size_t{1}, size_t{7}, size_t{17}}) {
      std::vector<float> out(n);
      gelu_tanh_mul(g.data() + g.size() - n, u.data() + g.size() - n, out.data(),
                    static_cast<int64_t>(n));
      EXPECT_TRUE(test::same_bits(out.data(), expect.data() + g.size() - n, n))
          << "n " << n << " target " << hwy::TargetName(target);
    }
    ++tested;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, test::kMinTargets);
}

TEST(GeluTanhMul, MatchesTheTanhFormulaInDouble) {
  for (int i = -4000; i <= 4000; ++i) {
    const float x = i * 0.0025f * 4.0f;  // [-40, 40]
    const double xd = x;
    const double want =
        0.5 * xd * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (xd + 0.044715 * xd * xd * xd)));
    EXPECT_NEAR(gelu_tanh_f32(x), want, 4e-7 * std::max(1.0, std::fabs(want))) << x;
  }
  EXPECT_EQ(gelu_tanh_f32(-1e20f), 0.0f);
  EXPECT_EQ(gelu_tanh_f32(1e20f), 1e20f);
}

TEST(Softcap, TanhAndSoftcapAreAccurate) {
  for (int i = -3000; i <= 3000; ++i) {
    const float y = i * 0.005f;  // [-15, 15]
    EXPECT_NEAR(tanh_f32(y), std::tanh(double(y)), 1.5e-7) << y;
    EXPECT_NEAR(softcap_f32(y * 4.0f, 30.0f), 30.0 * std::tanh(double(y * 4.0f) / 30.0), 5e-6);
  }
  EXPECT_EQ(tanh_f32(100.0f), 1.0f);
  EXPECT_EQ(tanh_f32(-100.0f), -1.0f);
  EXPECT_TRUE(std::isnan(tanh_f32(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace lockstep::kernels
