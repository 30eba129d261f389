// Invariance of linear(): every row of an M-row call equals the same row computed alone, equals
// the scalar oracle, for every thread count and every compiled SIMD target, bit for bit.
#include <gtest/gtest.h>

#include <cmath>

#include "hwy/targets.h"
#include "kernels/cpu/cpu_tuning.h"
#include "kernels/ops.h"
#include "kernels/ref/ref_ops.h"
#include "test_util.h"

namespace lockstep::kernels {
namespace {

struct Shape {
  int64_t N, K;
};
const Shape kShapes[] = {{1, 1}, {7, 15}, {33, 16}, {17, 17}, {40, 72}, {19, 200}, {64, 129}};
const DType kTypes[] = {DType::F32, DType::BF16, DType::F16};

std::vector<float> run(const float* x, int64_t M, const Weight& w, const float* bias, int threads) {
  ThreadPool pool(threads);
  std::vector<float> y(M * w.rows);
  linear(x, M, w, bias, y.data(), pool);
  return y;
}

TEST(Linear, RowsAreIndependentOfBatchThreadsAndMatchOracle) {
  for (DType t : kTypes) {
    for (const Shape& s : kShapes) {
      const auto wbytes = test::random_weight(t, s.N * s.K, 11);
      const Weight w{t, s.N, s.K, wbytes.data()};
      const auto bias = test::random_floats(s.N, 3);
      const auto x = test::random_floats(64 * s.K, 7);
      // Each row alone (M = 1) with one thread is the reference for that row.
      std::vector<float> alone(64 * s.N);
      for (int64_t m = 0; m < 64; ++m) {
        auto y = run(x.data() + m * s.K, 1, w, bias.data(), 1);
        std::copy(y.begin(), y.end(), alone.begin() + m * s.N);
        std::vector<float> oracle(s.N);
        ref::linear_cols(x.data() + m * s.K, 1, t, w.data, s.K, 0, s.N, oracle.data(), s.N);
        for (int64_t n = 0; n < s.N; ++n) oracle[n] += bias[n];
        ASSERT_TRUE(test::same_bits(y.data(), oracle.data(), s.N))
            << dtype_name(t) << " N=" << s.N << " K=" << s.K << " row " << m;
      }
      for (int64_t M = 1; M <= 64; ++M) {
        for (int threads : {1, 2, 3}) {
          // Rows starting at an offset, so a row sits at different positions in different calls.
          const int64_t off = (M * 7) % (65 - M);
          auto y = run(x.data() + off * s.K, M, w, bias.data(), threads);
          ASSERT_TRUE(test::same_bits(y.data(), alone.data() + off * s.N, M * s.N))
              << dtype_name(t) << " N=" << s.N << " K=" << s.K << " M=" << M
              << " threads=" << threads;
        }
      }
    }
  }
}

TEST(Linear, EveryCompiledTargetGivesTheSameBits) {
  const int64_t N = 37, K = 203, M = 9;
  for (DType t : kTypes) {
    const auto wbytes = test::random_weight(t, N * K, 5);
    const Weight w{t, N, K, wbytes.data()};
    const auto x = test::random_floats(M * K, 9);
    std::vector<float> oracle(M * N);
    ref::linear_cols(x.data(), M, t, w.data, K, 0, N, oracle.data(), N);
    int tested = 0;
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      auto y = run(x.data(), M, w, nullptr, 2);
      EXPECT_TRUE(test::same_bits(y.data(), oracle.data(), M * N))
          << dtype_name(t) << " target " << hwy::TargetName(target);
      ++tested;
    }
    hwy::SetSupportedTargetsForTest(0);
    EXPECT_GE(tested, test::kMinTargets) << "expected kMinTargets targets at least (test_util.h)";
  }
}

// The one-row (GEMV) path on every target: whole tiles and leftover columns, rows longer than
// its prefetch lookahead (the lookahead wraps into the next tile's rows) and a tail block.
TEST(Linear, OneRowPathOnEveryCompiledTargetMatchesOracle) {
  const int64_t N = 45;
  for (DType t : kTypes) {
    for (int64_t K : {16, 1000, 2064}) {
      const auto wbytes = test::random_weight(t, N * K, 17);
      const Weight w{t, N, K, wbytes.data()};
      const auto x = test::random_floats(K, 19);
      std::vector<float> oracle(N);
      ref::linear_cols(x.data(), 1, t, w.data, K, 0, N, oracle.data(), N);
      for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        for (int threads : {1, 2}) {
          auto y = run(x.data(), 1, w, nullptr, threads);
          EXPECT_TRUE(test::same_bits(y.data(), oracle.data(), N))
              << dtype_name(t) << " K=" << K << " threads=" << threads << " target "
              << hwy::TargetName(target);
        }
      }
      hwy::SetSupportedTargetsForTest(0);
    }
  }
}

// The one-row choices of cpu_tuning.h only move loads: the tile's width (weight rows read side by
// side; 1 on Zen 3/4, 8 elsewhere by default) and the prefetch (distance, locality, none). Every
// combination gives the oracle's bits on every target (the defaults are vendor-dependent, so CI
// on either vendor tests them all here).
TEST(Linear, EveryOneRowTuningChoiceGivesTheOraclesBits) {
  const int64_t N = 45, K = 2064;
  const int64_t bytes0 = gemv_prefetch_bytes();
  const int locality0 = gemv_prefetch_locality();
  const int rows0 = gemv_tile_rows();
  for (DType t : kTypes) {
    const auto wbytes = test::random_weight(t, N * K, 23);
    const Weight w{t, N, K, wbytes.data()};
    const auto x = test::random_floats(K, 29);
    std::vector<float> oracle(N);
    ref::linear_cols(x.data(), 1, t, w.data, K, 0, N, oracle.data(), N);
    for (int rows : {1, 2, 4, 8})
      for (int64_t bytes : {int64_t{0}, int64_t{64}, int64_t{6144}, int64_t{12288}, int64_t{1} << 20})
        for (int locality = 0; locality <= 3; ++locality) {
          set_gemv_tile_rows(rows);
          set_gemv_prefetch(bytes, locality);
          for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
            hwy::SetSupportedTargetsForTest(target);
            for (int threads : {1, 3}) {
              auto y = run(x.data(), 1, w, nullptr, threads);
              EXPECT_TRUE(test::same_bits(y.data(), oracle.data(), N))
                  << dtype_name(t) << " rows=" << rows << " bytes=" << bytes
                  << " locality=" << locality << " threads=" << threads << " target "
                  << hwy::TargetName(target);
            }
          }
          hwy::SetSupportedTargetsForTest(0);
        }
  }
  set_gemv_tile_rows(rows0);
  set_gemv_prefetch(bytes0, locality0);
}

TEST(Linear, CloseToDoublePrecision) {
  const int64_t N = 5, K = 1000;
  const auto wbytes = test::random_weight(DType::F32, N * K, 1);
  const Weight w{DType::F32, N, K, wbytes.data()};
  const auto x = test::random_floats(K, 2);
  auto y = run(x.data(), 1, w, nullptr, 1);
  const float* wf = reinterpret_cast<const float*>(wbytes.data());
  for (int64_t n = 0; n < N; ++n) {
    double exact = 0;
    for (int64_t k = 0; k < K; ++k) exact += double(x[k]) * wf[n * K + k];
    EXPECT_NEAR(y[n], exact, 1e-4 * std::sqrt(double(K)));
  }
}

}  // namespace
}  // namespace lockstep::kernels
