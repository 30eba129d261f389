// Quantized weights (kernels/quant_format.h): the MLX bit layout, the quantizer's error bound,
// the quantized linear against a float64 reference of the same dequantized weights, and the
// invariance rule (rows independent of M, offset, threads and SIMD target, equal to the oracle),
// all for the `float` quant dot (the `int8` one: quant_int8_test.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "hwy/targets.h"
#include "kernels/cpu/cpu_tuning.h"
#include "kernels/numerics.h"
#include "kernels/ops.h"
#include "kernels/quant_format.h"
#include "kernels/ref/quant_ref.h"
#include "kernels/ref/ref_ops.h"
#include "test_util.h"

namespace lockstep::kernels {
namespace {

struct Case {
  int bits;
  int64_t group, N, K;
};
const Case kCases[] = {{4, 32, 37, 64},  {4, 64, 16, 192}, {4, 128, 9, 256},
                       {8, 32, 37, 96},  {8, 64, 21, 128}, {8, 128, 5, 384},
                       {4, 16, 3, 16},   {8, 16, 40, 48}};

Weight float_weight(const std::vector<uint8_t>& bytes, DType t, int64_t N, int64_t K) {
  Weight w;
  w.dtype = t;
  w.rows = N;
  w.cols = K;
  w.data = bytes.data();
  return w;
}

QuantizedMatrix quantized(const Case& c, DType src, DType scale_dtype, uint32_t seed) {
  const auto bytes = test::random_weight(src, c.N * c.K, seed);
  ThreadPool pool(2);
  return quantize_affine(float_weight(bytes, src, c.N, c.K), c.bits, c.group, scale_dtype, pool);
}

std::vector<float> run(const float* x, int64_t M, const Weight& w, const float* bias, int threads) {
  const QuantDot before = quant_dot();
  set_quant_dot(QuantDot::Float);  // the dequantize-to-float dot these tests are about
  ThreadPool pool(threads);
  std::vector<float> y(M * w.rows);
  linear(x, M, w, bias, y.data(), pool);
  set_quant_dot(before);
  return y;
}

TEST(QuantFormat, CodesFollowTheMlxBitOrder) {
  // Element k of a row sits in bits [(k % per_word) * bits, ...) of word k / per_word.
  const uint32_t words[] = {0x76543210u, 0xfedcba98u, 0x03020100u, 0x07060504u};
  const uint16_t one = f32_to_bf16(1.0f), zero = f32_to_bf16(0.0f);
  Weight w;
  w.rows = 1;
  w.cols = 16;
  w.data = words;
  w.quant = QuantFormat::Affine;
  w.bits = 4;
  w.group_size = 16;
  w.scale_dtype = DType::BF16;
  w.scales = &one;
  w.biases = &zero;
  for (int k = 0; k < 16; ++k) EXPECT_EQ(quant_element(w, 0, k), float(k));
  w.bits = 8;
  w.cols = 8;
  w.group_size = 8;  // layout only: the kernels need groups of 16
  w.data = words + 2;
  for (int k = 0; k < 8; ++k) EXPECT_EQ(quant_code(w, 0, k), uint32_t(k));
}

TEST(QuantFormat, RoundTripErrorIsAtMostHalfAStep) {
  for (DType src : {DType::F32, DType::BF16}) {
    for (DType sd : {DType::BF16, DType::F16, DType::F32}) {
      for (const Case& c : kCases) {
        const auto bytes = test::random_weight(src, c.N * c.K, 21);
        const Weight fw = float_weight(bytes, src, c.N, c.K);
        ThreadPool pool(3);
        const QuantizedMatrix q = quantize_affine(fw, c.bits, c.group, sd, pool);
        const Weight w = q.view();
        const double top = (1 << c.bits) - 1;
        for (int64_t n = 0; n < c.N; ++n)
          for (int64_t g = 0; g < c.K / c.group; ++g) {
            double mn = INFINITY, mx = -INFINITY;
            for (int64_t i = 0; i < c.group; ++i) {
              const double v = ref::weight_at(src, fw.data, c.K, n, g * c.group + i);
              mn = std::min(mn, v);
              mx = std::max(mx, v);
            }
            const int64_t at = n * (c.K / c.group) + g;
            const double s = scalar_at(sd, w.scales, at);
            // The stored step is the ideal one, up to rounding of scale and bias in their dtype.
            ASSERT_LE(s, (mx - mn) / top * 1.01 + std::fabs(mn) * 0.01 / top);
            for (int64_t i = 0; i < c.group; ++i) {
              const int64_t k = g * c.group + i;
              const double v = ref::weight_at(src, fw.data, c.K, n, k);
              const double err = std::fabs(double(quant_element(w, n, k)) - v);
              ASSERT_LE(err, 0.5 * s * (1 + 1e-6) + 6e-8 * std::fabs(v))
                  << c.bits << "-bit g" << c.group << " scales " << dtype_name(sd) << " n=" << n
                  << " k=" << k;
            }
          }
      }
    }
  }
}

TEST(QuantLinear, OracleEqualsFloatLinearOfDequantizedWeights) {
  // The format's element feeds the float dot schedule unchanged: bit-equal to a float32 matrix.
  for (const Case& c : kCases) {
    const QuantizedMatrix q = quantized(c, DType::BF16, DType::BF16, 3);
    const Weight w = q.view();
    std::vector<float> deq(c.N * c.K);
    for (int64_t n = 0; n < c.N; ++n) ref::dequantize_row(w, n, deq.data() + n * c.K);
    const auto x = test::random_floats(5 * c.K, 4);
    std::vector<float> a(5 * c.N), b(5 * c.N);
    ref::quant_linear_cols(x.data(), 5, w, 0, c.N, a.data());
    ref::linear_cols(x.data(), 5, DType::F32, deq.data(), c.K, 0, c.N, b.data(), c.N);
    ASSERT_TRUE(test::same_bits(a.data(), b.data(), a.size())) << c.bits << " K=" << c.K;
  }
}

TEST(QuantLinear, CloseToFloat64OfTheSameDequantizedWeights) {
  for (const Case& c : kCases) {
    const QuantizedMatrix q = quantized(c, DType::F32, DType::BF16, 8);
    const Weight w = q.view();
    const auto x = test::random_floats(3 * c.K, 6);
    auto y = run(x.data(), 3, w, nullptr, 2);
    for (int64_t m = 0; m < 3; ++m)
      for (int64_t n = 0; n < c.N; ++n) {
        double exact = 0, magnitude = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          const double p = double(x[m * c.K + k]) * double(quant_element(w, n, k));
          exact += p;
          magnitude += std::fabs(p);
        }
        // Float32 rounding of K / 16 FMAs per lane plus the 4-level fold.
        const double bound = (double(c.K) / kLanes + 5) * std::ldexp(1.0, -24) * magnitude;
        EXPECT_NEAR(y[m * c.N + n], exact, bound * 1.01 + 1e-30);
      }
  }
}

TEST(QuantLinear, RowsAreIndependentOfBatchThreadsAndMatchOracle) {
  for (const Case& c : kCases) {
    const QuantizedMatrix q = quantized(c, DType::BF16, DType::BF16, 11);
    const Weight w = q.view();
    const auto bias = test::random_floats(c.N, 3);
    const auto x = test::random_floats(64 * c.K, 7);
    std::vector<float> alone(64 * c.N);
    for (int64_t m = 0; m < 64; ++m) {
      auto y = run(x.data() + m * c.K, 1, w, bias.data(), 1);
      std::copy(y.begin(), y.end(), alone.begin() + m * c.N);
      std::vector<float> oracle(c.N);
      ref::quant_linear_cols(x.data() + m * c.K, 1, w, 0, c.N, oracle.data());
      for (int64_t n = 0; n < c.N; ++n) oracle[n] += bias[n];
      ASSERT_TRUE(test::same_bits(y.data(), oracle.data(), c.N))
          << c.bits << "-bit N=" << c.N << " K=" << c.K << " row " << m;
    }
    for (int64_t M = 1; M <= 64; ++M)
      for (int threads : {1, 2, 3}) {
        const int64_t off = (M * 7) % (65 - M);
        auto y = run(x.data() + off * c.K, M, w, bias.data(), threads);
        ASSERT_TRUE(test::same_bits(y.data(), alone.data() + off * c.N, M * c.N))
            << c.bits << "-bit N=" << c.N << " K=" << c.K << " M=" << M
            << " threads=" << threads;
      }
  }
}

// Also at every one-row tile width (cpu_tuning.h), which never reaches the bits.
TEST(QuantLinear, EveryCompiledTargetGivesTheSameBits) {
  const int rows0 = gemv_tile_rows();
  for (const Case& c : kCases) {
    for (DType sd : {DType::BF16, DType::F16, DType::F32}) {
      const QuantizedMatrix q = quantized(c, DType::BF16, sd, 5);
      const Weight w = q.view();
      const int64_t M = 9;
      const auto x = test::random_floats(M * c.K, 9);
      std::vector<float> oracle(M * c.N);
      ref::quant_linear_cols(x.data(), M, w, 0, c.N, oracle.data());
      int tested = 0;
      for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        for (int width : {1, 2, 4, 8}) {
          set_gemv_tile_rows(width);
          auto y = run(x.data(), 1, w, nullptr, 2);
          EXPECT_TRUE(test::same_bits(y.data(), oracle.data(), c.N))
              << c.bits << "-bit K=" << c.K << " one row, tile width " << width << " target "
              << hwy::TargetName(target);
        }
        auto y = run(x.data(), M, w, nullptr, 2);
        EXPECT_TRUE(test::same_bits(y.data(), oracle.data(), M * c.N))
            << c.bits << "-bit K=" << c.K << " rows " << M << " target " << hwy::TargetName(target);
        ++tested;
      }
      hwy::SetSupportedTargetsForTest(0);
      EXPECT_GE(tested, test::kMinTargets) << "expected kMinTargets targets at least (test_util.h)";
    }
  }
  set_gemv_tile_rows(rows0);
}

TEST(QuantLinear, EmbeddingRowsAreTheDequantizedRows) {
  const Case c{4, 64, 10, 128};
  const QuantizedMatrix q = quantized(c, DType::BF16, DType::BF16, 2);
  const Weight w = q.view();
  const std::vector<int32_t> ids = {3, 0, 9, 3};
  std::vector<float> out(ids.size() * c.K), row(c.K);
  embedding(w, ids, out.data());
  for (size_t i = 0; i < ids.size(); ++i) {
    ref::dequantize_row(w, ids[i], row.data());
    EXPECT_TRUE(test::same_bits(out.data() + i * c.K, row.data(), c.K));
  }
}

}  // namespace
}  // namespace lockstep::kernels
