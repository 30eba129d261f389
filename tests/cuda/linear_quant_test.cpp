// CUDA linear on quantized (MLX affine 4/8-bit) weights: for every M (1..64, 65, 100, 2048), every
// quantized path (each of the skinny kernel's M <= 16 configs, forced one by one, its bf16-x
// config for M 17..64, the dequantize-into-scratch copy), alone and inside linear_multi, the result is bitwise
// the GPU linear of the BF16 matrix that the host dequantization gives (f32_to_bf16 of
// fma(q, s, b): what CudaBackend::place uploaded before quantized weights stayed quantized).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda_test_util.h"
#include "kernels/cuda/linear_quant_testing.h"
#include "kernels/ops.h"
#include "quant_test_util.h"

namespace lockstep::kernels::cuda::test {
namespace {

struct QCase {
  int bits;
  int64_t G;
  DType sdt;
  int64_t N, K;
  bool bias;
};

std::string case_name(const ::testing::TestParamInfo<QCase>& i) {
  const QCase& c = i.param;
  return "b" + std::to_string(c.bits) + "_g" + std::to_string(c.G) + "_" +
         std::string(dtype_name(c.sdt)) + "_" + std::to_string(c.N) + "x" + std::to_string(c.K) +
         (c.bias ? "_bias" : "");
}

struct Reset {
  ~Reset() {
    testing::set_linear_quant_path(0);
    testing::set_linear_quant_config(0);
    testing::set_linear_tile_override(0);
  }
};

class QuantLinearTest : public CudaTest, public ::testing::WithParamInterface<QCase> {};

TEST_P(QuantLinearTest, BitwiseTheDequantizedBf16Linear) {
  const QCase c = GetParam();
  const int64_t N = c.N, K = c.K;
  const bool huge = N * K > (int64_t{200} << 20);  // lm_head: fewer M, no 2048-token run
  const HostQuant hq = random_quant(N, K, c.bits, c.G, c.sdt, 7 + static_cast<uint32_t>(N + K));
  const DeviceQuant dq = to_device(hq.w);
  const DeviceBf16 db = bf16_on_device(dequantized_bf16(hq.w), N, K);
  DeviceBuffer<float> dbias(random_floats(N, 13));
  const float* bias = c.bias ? dbias.get() : nullptr;
  const int64_t P = huge ? 80 : 2048;  // pool of distinct x rows
  DeviceBuffer<float> dx(random_floats(P * K, 11, -2.0f, 2.0f));

  struct Run {
    int64_t M;
    int path;     // set_linear_quant_path
    int cfg = 0;  // set_linear_quant_config (M <= 16)
  };
  std::vector<Run> runs;
  if (huge) {
    for (int64_t m : {1, 2, 3, 5, 8, 9, 16, 17, 33, 64, 65}) runs.push_back({m, 0});
  } else {
    for (int64_t m = 1; m <= 64; ++m) runs.push_back({m, 0});
    for (int64_t m : {65, 100, 2048}) runs.push_back({m, 0});
  }
  for (int path = 1; path <= 3; ++path)
    for (int64_t m : {1, 2, 4, 5, 8, 9, 12, 16}) runs.push_back({m, path});
  for (int64_t m : {17, 40, 64}) runs.push_back({m, 3});
  // Every M <= 16 config, forced (where its shared memory does not fit, the rule's fallback runs).
  const int n_cfg = testing::set_linear_quant_config(0);
  for (int cfg = 1; cfg <= n_cfg; ++cfg)
    for (int64_t m : huge ? std::vector<int64_t>{1, 9} : std::vector<int64_t>{1, 3, 8, 9, 16})
      runs.push_back({m, 0, cfg});
  std::vector<int> cfg_ran(n_cfg + 1, 0);
  Reset reset;
  // Every run is checked (a failure does not stop the sweep), so one GPU run shows which M and
  // paths differ; the first few are described.
  int failed = 0, fused = 0, fusable = 0;
  std::string failures;
  for (const auto& [M, path, cfg] : runs) {
    testing::set_linear_quant_path(path);
    testing::set_linear_quant_config(cfg);
    const float* x = dx.get() + ((M * 37) % (P - M + 1)) * K;
    DeviceBuffer<float> yq(M * N), yb(M * N);
    linear(x, M, dq.w, bias, yq.get());
    const int used = testing::linear_quant_path_used();
    const int cfg_used = testing::linear_quant_config_used();
    if (cfg > 0 && cfg_used == cfg) ++cfg_ran[cfg];
    // The fused kernels hold every M <= 64 in Hopper's and the A100's shared memory, M <= 32 in
    // 99 KiB (sm_86 / sm_89 / sm_120: larger M takes the dequantized copy, the same bits).
    const bool fits = M <= (device_caps().smem_optin >= 163 * 1024 ? 64 : 32);
    fused += used != 4 && fits;
    fusable += fits && path != 3;
    linear(x, M, db.w, bias, yb.get());
    const auto a = yq.to_host(), r = yb.to_host();
    for (int64_t i = 0; i < M; ++i)
      if (!same_bits(a.data() + i * N, r.data() + i * N, N)) {
        if (++failed <= 6)
          failures += "\n  M=" + std::to_string(M) + " path " + std::to_string(path) + " config " +
                      std::to_string(cfg) + " (ran " + std::to_string(used) + ", config " +
                      std::to_string(cfg_used) + ") row " + std::to_string(i) + ": " +
                      diff_summary(a.data() + i * N, r.data() + i * N, N);
        break;
      }
  }
  EXPECT_EQ(failed, 0) << quant_name(hq.w) << ": " << failed << " of " << runs.size()
                       << " runs differ from the dequantized BF16 linear" << failures;
  // The fused kernel must actually run where it can (else the test proves only the fallback).
  EXPECT_EQ(fused, linear_quant_fused(hq.w) ? fusable : 0) << quant_name(hq.w);
  // Every config must run at least once where the shared memory surely fits them all (S <= 2:
  // 8192 rows or more; the small-K shapes).
  if (linear_quant_fused(hq.w)) {
    std::string never;
    for (int cfg = 1; cfg <= n_cfg; ++cfg)
      if (cfg_ran[cfg] == 0) never += " " + std::to_string(cfg);
    if (N >= 8192 && device_caps().smem_optin >= 227 * 1024) {
      EXPECT_TRUE(never.empty()) << quant_name(hq.w) << ": configs never ran:" << never;
    }
    else if (!never.empty()) std::printf("  %s: configs that did not fit:%s\n", quant_name(hq.w).c_str(), never.c_str());
  }
}

std::vector<QCase> cases() {
  std::vector<QCase> v;
  // Every width, group size and scale dtype on a split-4 shape whose pieces (288 k) start inside
  // groups of 64 and 128, so stages straddle group boundaries (F32 scales: the scratch copy).
  for (int bits : {4, 8})
    for (int64_t G : {32, 64, 128})
      for (DType sdt : {DType::BF16, DType::F16, DType::F32})
        v.push_back({bits, G, sdt, 320, 1152, G == 64});
  for (int bits : {4, 8}) {
    v.push_back({bits, 32, DType::BF16, 320, 1056, true});    // pieces of 272 k (4-bit: fallback)
    v.push_back({bits, 64, DType::BF16, 333, 1152, true});    // N not a multiple of 16 (S = 4)
    v.push_back({bits, 128, DType::F16, 8200, 512, false});   // S = 2
    v.push_back({bits, 32, DType::BF16, 40, 4096, true});     // S = 4, 1024 k per piece
    v.push_back({bits, 64, DType::BF16, 272, 256, false});    // S = 1
    v.push_back({bits, 64, DType::BF16, 16400, 1024, true});  // S = 1, >= 16k rows
    // Qwen3-8B shapes: q/o (S = 4), down (S = 4, K = 12288), lm_head (S = 1).
    v.push_back({bits, 64, DType::BF16, 4096, 4096, false});
    v.push_back({bits, 64, DType::BF16, 4096, 12288, true});
    v.push_back({bits, 64, DType::BF16, 151936, 4096, false});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantLinearTest, ::testing::ValuesIn(cases()), case_name);

// linear_multi with quantized weights (and a BF16 one) in one call: each y is bitwise the BF16
// linear of its weight's dequantized matrix, for every path and M up to 130. Qwen3-8B's q/k/v and
// gate/up (24576 x 4096 together) among the sets.
TEST_F(CudaTest, QuantLinearMultiMatchesDequantizedLinears) {
  struct W {
    int64_t N;
    int bits;  // 0: BF16
    int64_t G;
    DType sdt;
  };
  struct Set {
    int64_t K;
    std::vector<W> ws;
  };
  const std::vector<Set> sets = {
      {1152, {{320, 8, 64, DType::BF16}, {64, 8, 64, DType::BF16}, {72, 4, 32, DType::F16},
              {100, 0, 0, DType::BF16}}},
      {4096, {{4096, 8, 64, DType::BF16}, {1024, 8, 64, DType::BF16}, {1024, 8, 64, DType::BF16}}},
      {4096, {{12288, 4, 64, DType::BF16}, {12288, 4, 64, DType::BF16}}},
      {512, {{8200, 4, 128, DType::F32}, {8192, 4, 128, DType::F16}, {333, 8, 128, DType::BF16}}},
  };
  Reset reset;
  int checked = 0;
  for (const Set& set : sets) {
    const int64_t K = set.K, P = 140;
    std::vector<HostQuant> hqs;
    std::vector<DeviceQuant> dqs;
    std::vector<DeviceBf16> refs;
    std::vector<DeviceBuffer<float>> biases;
    std::vector<Weight> ws;
    hqs.reserve(set.ws.size());
    for (size_t i = 0; i < set.ws.size(); ++i) {
      const W& d = set.ws[i];
      biases.emplace_back(random_floats(d.N, 180 + static_cast<uint32_t>(i)));
      if (d.bits == 0) {
        refs.push_back(bf16_on_device(random_bf16(d.N * K, 170 + static_cast<uint32_t>(i)), d.N, K));
        ws.push_back(refs.back().w);
        continue;
      }
      hqs.push_back(random_quant(d.N, K, d.bits, d.G, d.sdt, 160 + static_cast<uint32_t>(i)));
      dqs.push_back(to_device(hqs.back().w));
      refs.push_back(bf16_on_device(dequantized_bf16(hqs.back().w), d.N, K));
      ws.push_back(dqs.back().w);
    }
    DeviceBuffer<float> dx(random_floats(P * K, 190, -2.0f, 2.0f));
    for (int64_t M : {1, 3, 8, 11, 16, 17, 33, 64, 65, 130}) {
      const float* xm = dx.get() + ((M * 7) % (P - M + 1)) * K;
      auto bias_of = [&](size_t i) { return i % 2 == 0 ? biases[i].get() : nullptr; };
      std::vector<std::vector<float>> want;
      testing::set_linear_quant_path(0);
      for (size_t i = 0; i < ws.size(); ++i) {
        DeviceBuffer<float> y(M * ws[i].rows);
        linear(xm, M, refs[i].w, bias_of(i), y.get());
        want.push_back(y.to_host());
      }
      for (int path = 0; path <= 3; ++path) {
        testing::set_linear_quant_path(path);
        std::vector<DeviceBuffer<float>> ys;
        std::vector<LinearOut> outs;
        for (size_t i = 0; i < ws.size(); ++i) {
          ys.emplace_back(M * ws[i].rows);
          outs.push_back({&ws[i], bias_of(i), ys.back().get()});
        }
        linear_multi(xm, M, outs.data(), static_cast<int64_t>(outs.size()));
        for (size_t i = 0; i < ws.size(); ++i) {
          const auto y = ys[i].to_host();
          ASSERT_TRUE(same_bits(y.data(), want[i].data(), y.size()))
              << "K=" << K << " weight " << i << " (N=" << ws[i].rows << ", "
              << (set.ws[i].bits ? quant_name(ws[i]) : std::string("bf16")) << ") M=" << M
              << " path " << path << ": linear_multi differs from the dequantized linear: "
              << diff_summary(y.data(), want[i].data(), y.size());
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 400);
}

TEST_F(CudaTest, QuantLinearRejectsBadLayouts) {
  const HostQuant hq = random_quant(32, 256, 4, 64, DType::BF16, 3);
  const DeviceQuant dq = to_device(hq.w);
  DeviceBuffer<float> dx(256), dy(32);
  Weight w = dq.w;
  w.bits = 3;
  EXPECT_THROW(linear(dx.get(), 1, w, nullptr, dy.get()), Error);
  w = dq.w;
  w.group_size = 24;
  EXPECT_THROW(linear(dx.get(), 1, w, nullptr, dy.get()), Error);
  w = dq.w;
  w.scale_dtype = DType::I32;
  EXPECT_THROW(linear(dx.get(), 1, w, nullptr, dy.get()), Error);
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
