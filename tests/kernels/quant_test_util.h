// Helpers of the quantized-linear tests (quant_int8_test.cpp, quant_panels_test.cpp): shapes,
// random quantized matrices, the int8 oracle, activations with edge values, a quant-dot scope.
#pragma once

#include <vector>

#include "core/thread_pool.h"
#include "kernels/numerics.h"
#include "kernels/ops.h"
#include "kernels/quant_format.h"
#include "kernels/ref/quant_int8_ref.h"
#include "test_util.h"

namespace lockstep::kernels::test_quant {

struct Case {
  int bits;
  int64_t group, N, K;
};

// Sets the quant-dot mode for one scope.
struct QuantDotScope {
  QuantDot before = quant_dot();
  explicit QuantDotScope(QuantDot m) { set_quant_dot(m); }
  ~QuantDotScope() { set_quant_dot(before); }
};

inline QuantizedMatrix quantized(const Case& c, DType scale_dtype, uint32_t seed) {
  const auto bytes = test::random_weight(DType::BF16, c.N * c.K, seed);
  Weight w;
  w.dtype = DType::BF16;
  w.rows = c.N;
  w.cols = c.K;
  w.data = bytes.data();
  ThreadPool pool(2);
  return quantize_affine(w, c.bits, c.group, scale_dtype, pool);
}

inline std::vector<float> run(const float* x, int64_t M, const Weight& w, const float* bias,
                              int threads) {
  ThreadPool pool(threads);
  std::vector<float> y(M * w.rows);
  linear(x, M, w, bias, y.data(), pool);
  return y;
}

inline std::vector<float> oracle(const float* x, int64_t M, const Weight& w, const float* bias) {
  std::vector<float> y(M * w.rows);
  ref::quant_int8_linear_cols(x, M, w, 0, w.rows, y.data());
  if (bias)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < w.rows; ++n) y[m * w.rows + n] += bias[n];
  return y;
}

// Activations with a spread of magnitudes per block, exact zeros and ties x * inv = n + 0.5.
inline std::vector<float> activations(int64_t n, uint32_t seed) {
  auto x = test::random_floats(n, seed);
  for (int64_t i = 0; i < n; ++i) {
    if (i % 97 == 5) x[i] *= 40.0f;
    if (i % 53 == 7) x[i] = 0.0f;
  }
  return x;
}

}  // namespace lockstep::kernels::test_quant
