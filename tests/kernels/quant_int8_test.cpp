// The integer-dot quantized linear (kernels/quant_int8.h, `--quant-dot int8`): the activation
// codes and the linear give the scalar oracle's bits on every compiled Highway target (AVX-512
// VNNI included), rows are independent of M, offset and threads, linear_multi / linear_grouped
// equal separate calls, extreme codes do not saturate, and the result is close to the float
// linear of the dequantized weights.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL  // iterate the VNNI target too (cpu/linear_quant_int8.cpp compiles it)
#endif
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "hwy/targets.h"
#include "kernels/cpu/act_quant.h"
#include "kernels/cpu/cpu_tuning.h"
#include "kernels/numerics.h"
#include "kernels/ops.h"
#include "kernels/quant_format.h"
#include "kernels/quant_int8.h"
#include "kernels/ref/quant_int8_ref.h"
#include "kernels/ref/quant_ref.h"
#include "quant_test_util.h"
#include "test_util.h"

namespace lockstep::kernels {
namespace {

using namespace test_quant;

// SIMD shapes (K % 128 == 0, groups 16..256, group counts below, at and past 16) and shapes the
// integer kernel leaves to the oracle (K % 128 != 0 for 4-bit, K % 64 != 0 for 8-bit).
const Case kCases[] = {{4, 64, 37, 1024}, {4, 32, 21, 512},  {4, 128, 16, 384}, {4, 16, 9, 256},
                       {4, 256, 5, 512},  {4, 64, 3, 2176},  {8, 64, 37, 1024}, {8, 32, 21, 512},
                       {8, 128, 16, 384}, {8, 16, 9, 256},   {8, 256, 5, 512},  {4, 32, 7, 96},
                       {8, 16, 7, 48},    {8, 32, 11, 160},
                       // group-interleaved tiles: one partial chunk, a full and a partial one
                       {4, 64, 11, 768},  {4, 64, 6, 1408},  {4, 32, 13, 640}};

template <typename T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST(Int8Acts, EveryCompiledTargetGivesTheOraclesCodes) {
  for (int64_t block : {16, 32, 64, 128, 256}) {
    for (int64_t K : {int64_t{256}, int64_t{512}, int64_t{768}}) {
      if (K % block) continue;
      const int64_t M = 5;
      auto x = activations(M * K, 3);
      for (int64_t i = K; i < 2 * K; ++i) x[i] = 0.0f;  // an all-zero row: d = inv = 0
      // A block whose maximum sits at 127 * 2^-7 steps: x * inv lands on halves (ties to even).
      for (int64_t i = 0; i < block; ++i) x[2 * K + i] = (static_cast<float>(i % 32) - 15.5f) / 8;
      x[2 * K] = 127.0f / 8;
      Int8Acts want;
      ref::quantize_acts(x.data(), M, K, block, want);
      ASSERT_FALSE(want.qnib.empty());
      int tested = 0;
      for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        Int8Acts got;
        quantize_acts(x.data(), M, K, block, got);
        EXPECT_TRUE(same(got.q, want.q) && same(got.qnib, want.qnib) && same(got.d, want.d) &&
                    same(got.e, want.e) && same(got.sum, want.sum))
            << "block " << block << " K " << K << " target " << hwy::TargetName(target);
        ++tested;
      }
      hwy::SetSupportedTargetsForTest(0);
      EXPECT_GE(tested, test::kMinTargets);
    }
  }
}

TEST(Int8Acts, CodesAreTheRoundedScaledValues) {
  const int64_t K = 256, block = 64;
  const auto x = activations(2 * K, 8);
  Int8Acts a;
  quantize_acts(x.data(), 2, K, block, a);
  for (int64_t m = 0; m < 2; ++m)
    for (int64_t b = 0; b < K / block; ++b) {
      const float d = a.d[m * a.blocks_padded + b];
      int32_t sum = 0;
      for (int64_t i = b * block; i < (b + 1) * block; ++i) {
        const int q = a.q[m * K + i];
        ASSERT_LE(std::abs(q), 127);
        ASSERT_LE(std::fabs(double(q) * d - x[m * K + i]), 0.5 * d * (1 + 1e-5));
        sum += q;
      }
      EXPECT_EQ(a.sum[m * a.blocks_padded + b], sum);
    }
}

TEST(QuantInt8Linear, EveryCompiledTargetGivesTheOraclesBits) {
  QuantDotScope mode(QuantDot::Int8);
  for (const Case& c : kCases) {
    for (DType sd : {DType::BF16, DType::F16, DType::F32}) {
      const QuantizedMatrix q = quantized(c, sd, 5);
      const Weight w = q.view();
      const int64_t M = 7;
      const auto x = activations(M * c.K, 9);
      const auto bias = test::random_floats(c.N, 4);
      int tested = 0;
      for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        for (int64_t rows = 1; rows <= M; ++rows) {
          const auto want = oracle(x.data(), rows, w, bias.data());
          for (int threads : {1, 2, 3}) {
            const auto y = run(x.data(), rows, w, bias.data(), threads);
            ASSERT_TRUE(test::same_bits(y.data(), want.data(), want.size()))
                << c.bits << "-bit g" << c.group << " K=" << c.K << " N=" << c.N << " scales "
                << dtype_name(sd) << " rows " << rows << " threads " << threads << " target "
                << hwy::TargetName(target);
          }
        }
        ++tested;
      }
      hwy::SetSupportedTargetsForTest(0);
      EXPECT_GE(tested, test::kMinTargets) << "expected kMinTargets targets at least (test_util.h)";
    }
  }
}

// One-row calls at every tile width (cpu_tuning.h: code rows read side by side, capped at the
// kernel's widest) with and without software prefetch, in both forms (nta: lines a distance ahead
// in the row, into the next tiles' rows; t2..t0: the next tile's codes per chunk): the oracle's
// bits on every target either way.
TEST(QuantInt8Linear, OneRowTuningChoicesGiveTheOraclesBits) {
  QuantDotScope mode(QuantDot::Int8);
  const int64_t bytes0 = gemv_prefetch_bytes();
  const int locality0 = gemv_prefetch_locality();
  const int rows0 = gemv_tile_rows();
  for (const Case& c : kCases) {
    const QuantizedMatrix q = quantized(c, DType::BF16, 13);
    const Weight w = q.view();
    const auto x = activations(c.K, 15);
    const auto want = oracle(x.data(), 1, w, nullptr);
    for (int rows : {1, 2, 4, 8})
      for (int locality : {0, 1, 3})
        for (int64_t bytes : {int64_t{0}, int64_t{6144}, int64_t{65536}}) {
          set_gemv_tile_rows(rows);
          set_gemv_prefetch(bytes, locality);
          for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
            hwy::SetSupportedTargetsForTest(target);
            const auto y = run(x.data(), 1, w, nullptr, 2);
            EXPECT_TRUE(test::same_bits(y.data(), want.data(), want.size()))
                << c.bits << "-bit g" << c.group << " K=" << c.K << " rows " << rows
                << " locality " << locality << " bytes " << bytes << " target "
                << hwy::TargetName(target);
          }
          hwy::SetSupportedTargetsForTest(0);
        }
  }
  set_gemv_tile_rows(rows0);
  set_gemv_prefetch(bytes0, locality0);
}

// The group-interleaved tiles (groups of 4, 8 or 16 code words: 4-bit 32..128, 8-bit 16..64)
// forced on every call, down to one row, and turned off: the oracle's bits either way, on every
// target, at tile remainders of rows and columns and partial chunks of groups.
TEST(QuantInt8Linear, InterleavedTilesAndLaneTreesGiveTheOraclesBits) {
  QuantDotScope mode(QuantDot::Int8);
  const int64_t before = interleaved_min_rows();
  for (const Case& c :
       {Case{4, 64, 37, 1024}, Case{4, 64, 11, 768}, Case{4, 64, 6, 1408}, Case{4, 32, 13, 640},
        Case{4, 32, 21, 512}, Case{4, 128, 9, 2304}, Case{8, 64, 37, 1024}, Case{8, 64, 7, 768},
        Case{8, 32, 13, 640}, Case{8, 16, 10, 320}, Case{4, 128, 5, 384}}) {
    const QuantizedMatrix q = quantized(c, DType::BF16, 12);
    const Weight w = q.view();
    const int64_t M = 9;
    const auto x = activations(M * c.K, 13);
    const auto want = oracle(x.data(), M, w, nullptr);
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      for (int64_t min_rows : {int64_t{0}, int64_t{1}})
        for (int64_t rows = 1; rows <= M; ++rows) {
          set_interleaved_min_rows(min_rows);
          const auto y = run(x.data(), rows, w, nullptr, 2);
          set_interleaved_min_rows(before);
          ASSERT_TRUE(test::same_bits(y.data(), want.data(), rows * c.N))
              << "g" << c.group << " K=" << c.K << " N=" << c.N << " rows " << rows
              << (min_rows ? " interleaved" : " lane trees") << " target "
              << hwy::TargetName(target);
        }
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

TEST(QuantInt8Linear, RowsAreIndependentOfBatchOffsetAndThreads) {
  QuantDotScope mode(QuantDot::Int8);
  for (const Case& c : {Case{4, 64, 40, 1024}, Case{8, 32, 24, 512}, Case{4, 128, 19, 384}}) {
    const QuantizedMatrix q = quantized(c, DType::BF16, 11);
    const Weight w = q.view();
    const auto x = activations(64 * c.K, 7);
    const auto alone = oracle(x.data(), 64, w, nullptr);
    for (int64_t M = 1; M <= 64; ++M)
      for (int threads : {1, 2, 3}) {
        const int64_t off = (M * 7) % (65 - M);
        const auto y = run(x.data() + off * c.K, M, w, nullptr, threads);
        ASSERT_TRUE(test::same_bits(y.data(), alone.data() + off * c.N, M * c.N))
            << c.bits << "-bit M=" << M << " threads=" << threads;
      }
  }
}

// Codes and activations at the ends of their ranges: the maddubs forms would saturate int16 if
// the 8-bit codes entered unshifted, or if pairs of 4-bit products were summed carelessly.
TEST(QuantInt8Linear, ExtremeCodesAndActivationsAreExact) {
  QuantDotScope mode(QuantDot::Int8);
  for (int bits : {4, 8}) {
    const int64_t K = 512, G = 64, N = 6;
    const uint32_t top = (1u << bits) - 1;
    QuantizedMatrix q;
    q.rows = N;
    q.cols = K;
    q.bits = bits;
    q.group_size = G;
    q.scale_dtype = DType::F32;
    const int per_word = 32 / bits;
    q.words.assign(N * K / per_word, 0);
    // Row 0 all top codes, row 1 all zero, rows 2.. alternating patterns of 0, top, top / 2 + 1.
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const uint32_t codes[3] = {0, top, top / 2 + 1};
        const uint32_t v = n == 0 ? top : n == 1 ? 0 : codes[(k * n + k / 3) % 3];
        q.words[(n * K + k) / per_word] |= v << ((k % per_word) * bits);
      }
    std::vector<float> s(N * K / G, 1.0f / 64), b(N * K / G, -0.25f);
    q.scales.resize(s.size() * 4);
    q.biases.resize(b.size() * 4);
    std::memcpy(q.scales.data(), s.data(), q.scales.size());
    std::memcpy(q.biases.data(), b.data(), q.biases.size());
    const Weight w = q.view();
    // Rows of +-amax only (codes +-127): all positive, all negative, alternating, in pairs.
    const int64_t M = 4;
    std::vector<float> x(M * K);
    for (int64_t k = 0; k < K; ++k) {
      x[k] = 3.0f;
      x[K + k] = -3.0f;
      x[2 * K + k] = k % 2 ? -3.0f : 3.0f;
      x[3 * K + k] = (k / 2) % 2 ? -3.0f : 3.0f;
    }
    const auto want = oracle(x.data(), M, w, nullptr);
    // The oracle's own value: every product is exact here, so compare with double arithmetic.
    for (int64_t n = 0; n < N; ++n) {
      double exact = 0;
      for (int64_t k = 0; k < K; ++k) exact += double(quant_element(w, n, k)) * x[k];
      EXPECT_NEAR(want[n], exact, 1e-3 * (1 + std::fabs(exact))) << bits << "-bit row " << n;
    }
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      const auto y = run(x.data(), M, w, nullptr, 2);
      EXPECT_TRUE(test::same_bits(y.data(), want.data(), want.size()))
          << bits << "-bit target " << hwy::TargetName(target);
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

TEST(QuantInt8Linear, MultiAndGroupedEqualSeparateCalls) {
  QuantDotScope mode(QuantDot::Int8);
  const QuantizedMatrix a = quantized({4, 64, 40, 1024}, DType::BF16, 1);
  const QuantizedMatrix b = quantized({8, 64, 24, 1024}, DType::BF16, 2);
  const QuantizedMatrix c = quantized({4, 32, 33, 1024}, DType::BF16, 3);  // another group size
  const Weight wa = a.view(), wb = b.view(), wc = c.view();
  const auto bias = test::random_floats(40, 6);
  ThreadPool pool(3);
  for (int64_t M : {1, 3, 8}) {
    const auto x = activations(M * 1024, 10 + M);
    std::vector<float> ya(M * 40), yb(M * 24), yc(M * 33);
    const LinearOut outs[] = {{&wa, bias.data(), ya.data()}, {&wb, nullptr, yb.data()},
                              {&wc, nullptr, yc.data()}};
    linear_multi(x.data(), M, outs, pool);
    EXPECT_TRUE(same(ya, run(x.data(), M, wa, bias.data(), 2))) << "M=" << M;
    EXPECT_TRUE(same(yb, run(x.data(), M, wb, nullptr, 2))) << "M=" << M;
    EXPECT_TRUE(same(yc, run(x.data(), M, wc, nullptr, 2))) << "M=" << M;
    const LinearOut two[] = {{&wa, bias.data(), ya.data()}, {&wb, nullptr, yb.data()}};
    std::fill(ya.begin(), ya.end(), 0.0f);
    linear_multi(x.data(), M, two, pool);
    EXPECT_TRUE(same(ya, run(x.data(), M, wa, bias.data(), 1))) << "M=" << M;

    // Jobs that read the same x share its prepared codes where the group size matches (an
    // expert's gate and up), and not where it differs.
    const auto x2 = activations(2 * 1024, 20 + M);
    std::vector<float> ga(M * 40), gc(2 * 33), gb(M * 24), gc2(M * 33), ga2(M * 40);
    const LinearJob jobs[] = {{x.data(), M, &wa, bias.data(), ga.data()},
                              {x2.data(), 2, &wc, nullptr, gc.data()},
                              {x.data(), M, &wb, nullptr, gb.data()},
                              {x.data(), M, &wc, nullptr, gc2.data()},
                              {x.data(), M, &wa, nullptr, ga2.data()}};
    linear_grouped(jobs, pool);
    EXPECT_TRUE(same(ga, run(x.data(), M, wa, bias.data(), 2))) << "M=" << M;
    EXPECT_TRUE(same(gc, run(x2.data(), 2, wc, nullptr, 2))) << "M=" << M;
    EXPECT_TRUE(same(gb, run(x.data(), M, wb, nullptr, 2))) << "M=" << M;
    EXPECT_TRUE(same(gc2, run(x.data(), M, wc, nullptr, 2))) << "M=" << M;
    EXPECT_TRUE(same(ga2, run(x.data(), M, wa, nullptr, 2))) << "M=" << M;
  }
}

TEST(QuantInt8Linear, CloseToTheFloatLinearOfTheDequantizedWeights) {
  // The int8 activations carry a relative error of about 1/254 per element; the dot's error is
  // a sum of such terms with random signs, far below 2% of the products' magnitude.
  for (const Case& c : {Case{4, 64, 16, 1024}, Case{8, 32, 16, 512}}) {
    const QuantizedMatrix q = quantized(c, DType::BF16, 8);
    const Weight w = q.view();
    const auto x = test::random_floats(3 * c.K, 6);
    std::vector<float> y;
    {
      QuantDotScope mode(QuantDot::Int8);
      y = run(x.data(), 3, w, nullptr, 2);
    }
    for (int64_t m = 0; m < 3; ++m)
      for (int64_t n = 0; n < c.N; ++n) {
        double exact = 0, magnitude = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          const double p = double(x[m * c.K + k]) * double(quant_element(w, n, k));
          exact += p;
          magnitude += std::fabs(p);
        }
        EXPECT_NEAR(y[m * c.N + n], exact, 0.02 * magnitude) << c.bits << " m=" << m << " n=" << n;
      }
  }
}

TEST(QuantInt8Linear, FloatModeStillGivesTheDequantizedSchedule) {
  const Case c{4, 64, 16, 1024};
  const QuantizedMatrix q = quantized(c, DType::BF16, 4);
  const Weight w = q.view();
  const auto x = test::random_floats(2 * c.K, 5);
  QuantDotScope mode(QuantDot::Float);
  std::vector<float> want(2 * c.N);
  ref::quant_linear_cols(x.data(), 2, w, 0, c.N, want.data());
  const auto y = run(x.data(), 2, w, nullptr, 2);
  EXPECT_TRUE(test::same_bits(y.data(), want.data(), want.size()));
}

}  // namespace
}  // namespace lockstep::kernels
