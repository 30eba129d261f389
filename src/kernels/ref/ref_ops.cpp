#include "kernels/ref/ref_ops.h"

#include "core/error.h"
#include <cmath>

#include "kernels/schedule.h"

namespace lockstep::kernels::ref {

float weight_at(DType dtype, const void* w, int64_t K, int64_t n, int64_t k) {
  const int64_t i = n * K + k;
  switch (dtype) {
    case DType::F32:
      return static_cast<const float*>(w)[i];
    case DType::BF16:
      return bf16_to_f32(static_cast<const uint16_t*>(w)[i]);
    case DType::F16:
      return f16_to_f32(static_cast<const uint16_t*>(w)[i]);
    default:
      fail("linear: weight dtype ", dtype_name(dtype), " is not supported (expected F32, BF16 or F16)");
  }
}

void linear_cols(const float* x, int64_t M, DType dtype, const void* w, int64_t K, int64_t n0,
                 int64_t n1, float* y, int64_t N) {
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16)
    fail("linear: weight dtype ", dtype_name(dtype), " is not supported (expected F32, BF16 or F16)");
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * K;
    for (int64_t n = n0; n < n1; ++n)
      y[m * N + n] = scheduled_dot(
          K, [&](int64_t k) { return xr[k]; },
          [&](int64_t k) { return weight_at(dtype, w, K, n, k); });
  }
}

void linear_cols_other_order(const float* x, int64_t M, DType dtype, const void* w, int64_t K,
                             int64_t n0, int64_t n1, float* y, int64_t N) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      float lanes[8] = {};
      for (int64_t k = 0; k < K; ++k)
        lanes[k % 8] = std::fma(x[m * K + k], weight_at(dtype, w, K, n, k), lanes[k % 8]);
      y[m * N + n] = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                     ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    }
}

float dot(const float* a, const float* b, int64_t K) {
  return scheduled_dot(K, [&](int64_t k) { return a[k]; }, [&](int64_t k) { return b[k]; });
}

}  // namespace lockstep::kernels::ref
