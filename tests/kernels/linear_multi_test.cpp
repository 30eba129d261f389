// linear_multi (ops.h): several weights against the same x in one pool call. Every output must
// be bitwise what a separate linear() call gives, for float and quantized weights (both quant-dot
// modes), mixed groups, biases, M = 1..17 rows, 1 and 2 threads and every compiled SIMD target;
// likewise linear_grouped (one input per product).
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "hwy/targets.h"
#include "kernels/numerics.h"
#include "kernels/ops.h"
#include "kernels/quant_format.h"
#include "test_util.h"

namespace lockstep::kernels {
namespace {

struct Owned {  // a weight with the bytes it points at
  std::vector<uint8_t> bytes;
  QuantizedMatrix q;
  Weight w;
  std::vector<float> bias;
};

Owned float_weight(DType t, int64_t N, int64_t K, uint32_t seed, bool bias) {
  Owned o;
  o.bytes = test::random_weight(t, N * K, seed);
  o.w.dtype = t;
  o.w.rows = N;
  o.w.cols = K;
  o.w.data = o.bytes.data();
  if (bias) o.bias = test::random_floats(N, seed + 1);
  return o;
}

Owned quant_weight(int bits, int64_t group, int64_t N, int64_t K, uint32_t seed, bool bias) {
  Owned f = float_weight(DType::BF16, N, K, seed, bias);
  ThreadPool pool(2);
  Owned o;
  o.q = quantize_affine(f.w, bits, group, DType::BF16, pool);
  o.w = o.q.view();
  o.bias = f.bias;
  return o;
}

// Runs the group both ways and compares every output bit, in the current quant-dot mode.
void check_one_mode(const std::vector<const Owned*>& ws, int64_t K, std::string_view what) {
  const QuantDot mode = quant_dot();
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (int64_t M = 1; M <= 17; ++M) {
      const auto x = test::random_floats(M * K, static_cast<uint32_t>(100 + M));
      std::vector<std::vector<float>> sep(ws.size()), multi(ws.size());
      std::vector<LinearOut> outs;
      for (size_t i = 0; i < ws.size(); ++i) {
        const Owned& o = *ws[i];
        const float* bias = o.bias.empty() ? nullptr : o.bias.data();
        sep[i].assign(M * o.w.rows, 0.0f);
        multi[i].assign(M * o.w.rows, -1.0f);
        linear(x.data(), M, o.w, bias, sep[i].data(), pool);
        outs.push_back({&o.w, bias, multi[i].data()});
      }
      linear_multi(x.data(), M, outs, pool);
      for (size_t i = 0; i < ws.size(); ++i)
        ASSERT_TRUE(test::same_bits(sep[i].data(), multi[i].data(), sep[i].size()))
            << what << ": weight " << i << " M=" << M << " threads=" << threads << " quant dot "
            << quant_dot_name(mode);
    }
  }
}

// check_one_mode in both quant-dot modes (they differ only for quantized weights).
void check(const std::vector<const Owned*>& ws, int64_t K, std::string_view what) {
  const QuantDot before = quant_dot();
  for (QuantDot mode : {QuantDot::Float, QuantDot::Int8}) {
    set_quant_dot(mode);
    check_one_mode(ws, K, what);
  }
  set_quant_dot(before);
}

void check_all_targets(const std::vector<const Owned*>& ws, int64_t K, std::string_view what) {
  int tested = 0;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    check(ws, K, what);
    ++tested;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 1);
}

TEST(LinearMulti, FloatWeightsMatchSeparateCalls) {
  for (DType t : {DType::BF16, DType::F32, DType::F16}) {
    // q/k/v-like: sizes not multiples of the grain or of any tile; K with a tail block.
    const int64_t K = 72;
    const Owned a = float_weight(t, 37, K, 1, true), b = float_weight(t, 9, K, 2, false),
                c = float_weight(t, 21, K, 3, true);
    check_all_targets({&a, &b, &c}, K, dtype_name(t));
  }
}

TEST(LinearMulti, QuantizedAndMixedWeightsMatchSeparateCalls) {
  const int64_t K = 128;
  const Owned q4 = quant_weight(4, 32, 37, K, 11, true), q8 = quant_weight(8, 64, 19, K, 12, false),
              q4b = quant_weight(4, 64, 5, K, 13, false), f = float_weight(DType::BF16, 33, K, 14, true);
  check_all_targets({&q4, &q8, &q4b}, K, "quantized");
  check_all_targets({&f, &q4, &q8, &f}, K, "mixed");
  check_all_targets({&q8, &f}, K, "8-bit and float");
}

TEST(LinearMulti, OneWeightAndFastNumerics) {
  const int64_t K = 64;
  const Owned a = float_weight(DType::BF16, 40, K, 21, true), b = float_weight(DType::BF16, 7, K, 22, false);
  check({&a}, K, "one weight");
  set_numerics(Numerics::Fast);  // multi-row calls fall back to separate linear() calls
  check({&a, &b}, K, "fast");
  set_numerics(Numerics::Exact);
}

// linear_grouped: each job has its own x and row count (an MoE layer's experts over the tokens
// routed to each, some of them none), float and quantized, K differing between jobs (gate/up vs
// down). Every output bitwise equal to a separate linear() call, threads 1..3, every target.
void check_grouped_one_mode(const std::vector<const Owned*>& ws, std::string_view what) {
  const QuantDot mode = quant_dot();
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int shift = 0; shift < 4; ++shift) {
      std::vector<std::vector<float>> xs(ws.size()), sep(ws.size()), grouped(ws.size());
      std::vector<LinearJob> jobs;
      for (size_t i = 0; i < ws.size(); ++i) {
        const Owned& o = *ws[i];
        const int64_t M = static_cast<int64_t>((i * 5 + shift * 3) % 7);  // 0 .. 6 rows
        const float* bias = o.bias.empty() ? nullptr : o.bias.data();
        xs[i] = test::random_floats(std::max<int64_t>(M, 1) * o.w.cols,
                                    static_cast<uint32_t>(300 + 10 * i + shift));
        sep[i].assign(M * o.w.rows, 0.0f);
        grouped[i].assign(M * o.w.rows, -1.0f);
        if (M > 0) linear(xs[i].data(), M, o.w, bias, sep[i].data(), pool);
        jobs.push_back({xs[i].data(), M, &o.w, bias, grouped[i].data()});
      }
      linear_grouped(jobs, pool);
      for (size_t i = 0; i < ws.size(); ++i)
        ASSERT_TRUE(test::same_bits(sep[i].data(), grouped[i].data(), sep[i].size()))
            << what << ": job " << i << " threads=" << threads << " shift=" << shift
            << " quant dot " << quant_dot_name(mode);
    }
  }
}

void check_grouped(const std::vector<const Owned*>& ws, std::string_view what) {
  const QuantDot before = quant_dot();
  for (QuantDot mode : {QuantDot::Float, QuantDot::Int8}) {
    set_quant_dot(mode);
    check_grouped_one_mode(ws, what);
  }
  set_quant_dot(before);
}

TEST(LinearGrouped, ExpertJobsMatchSeparateCalls) {
  const Owned g = float_weight(DType::BF16, 40, 64, 31, false), u = float_weight(DType::BF16, 40, 64, 32, false),
              d = float_weight(DType::BF16, 64, 40, 33, true), f32 = float_weight(DType::F32, 19, 72, 34, false),
              q4 = quant_weight(4, 32, 40, 64, 35, false), q8 = quant_weight(8, 32, 23, 96, 36, true),
              q4d = quant_weight(4, 32, 64, 128, 37, false);
  int tested = 0;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    check_grouped({&g, &u, &g, &u, &d, &f32}, "float");
    check_grouped({&q4, &q4, &q8, &q4d, &g, &q4}, "quantized and mixed");
    ++tested;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 1);
  set_numerics(Numerics::Fast);  // multi-row jobs fall back to separate linear() calls
  check_grouped({&g, &u, &d}, "fast");
  set_numerics(Numerics::Exact);
}

}  // namespace
}  // namespace lockstep::kernels
