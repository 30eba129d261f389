// The project's own transcendentals stay within a few ulp of libm over their useful range.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/math.h"

namespace lockstep::kernels {
namespace {

double rel_err(double got, double want) {
  return std::fabs(got - want) / std::max(std::fabs(want), 1e-30);
}

TEST(Math, ExpLogSoftplusAccuracy) {
  for (float x = -87.0f; x < 88.0f; x += 0.0137f)
    ASSERT_LT(rel_err(exp_f32(x), std::exp(double(x))), 4e-7) << x;
  for (float x = 1e-30f; x < 1e30f; x *= 1.37f)
    ASSERT_LT(std::fabs(log_f32(x) - std::log(double(x))), 3e-7 * std::max(1.0, std::fabs(std::log(double(x))))) << x;
  for (float x = -30.0f; x < 30.0f; x += 0.01f)
    ASSERT_LT(rel_err(softplus_f32(x), std::log1p(std::exp(double(x)))), 1e-6) << x;
  EXPECT_EQ(exp_f32(-200.0f), 0.0f);
  EXPECT_TRUE(std::isinf(exp_f32(100.0f)));
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(log_f32(1.0f), 0.0f);
}

}  // namespace
}  // namespace lockstep::kernels
