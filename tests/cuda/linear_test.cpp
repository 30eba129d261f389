// CUDA linear: rows are bitwise independent of M, of their position and of the other rows (every
// tile configuration, skinny and tiled, walks K alike: each M <= 16 config and tiled tile is forced
// in turn, alone and in linear_multi); accuracy against the CPU kernel and a float64 reference with
// bf16-rounded activations.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "cuda_test_util.h"

namespace lockstep::kernels::cuda::test {
namespace {

struct LinearCase {
  int64_t N, K;
  bool bias;
};

class LinearTest : public CudaTest, public ::testing::WithParamInterface<LinearCase> {};

TEST_P(LinearTest, RowsBitwiseIndependentOfBatch) {
  const auto [N, K, with_bias] = GetParam();
  const int64_t P = 600;  // pool of distinct rows
  const auto x = random_floats(P * K, 11);
  const auto w = random_bf16(N * K, 12);
  const auto b = random_floats(N, 13);
  DeviceBuffer<float> dx(x), db(b);
  DeviceBuffer<uint16_t> dw(w);
  Weight wt;
  wt.dtype = DType::BF16;
  wt.rows = N;
  wt.cols = K;
  wt.data = dw.get();
  const float* bias = with_bias ? db.get() : nullptr;

  // Every pool row alone (M = 1).
  DeviceBuffer<float> dref(P * N);
  for (int64_t r = 0; r < P; ++r) linear(dx.get() + r * K, 1, wt, bias, dref.get() + r * N);
  const auto ref = dref.to_host();

  // (M, forced tile of the tiled kernel, forced M <= 16 config; 0 = the kernel's own pick)
  struct Run {
    int64_t M;
    int tile, config;
  };
  std::vector<Run> Ms;
  for (int64_t m = 1; m <= 64; ++m) Ms.push_back({m, 0, 0});
  for (int64_t m : {65, 100, 129, 200, 513, 2048}) Ms.push_back({m, 0, 0});
  for (int64_t m : {65, 129, 513}) Ms.push_back({m, -1, 0});  // the mma.sync tiles' own pick
  // 1-3 mma.sync tiles, 4-7 wgmma tiles, 8-9 its SPLIT tiles (where the device runs it)
  for (int tile = 1; tile <= (device_caps().wgmma ? 9 : 3); ++tile)
    for (int64_t m : {65, 200, 300}) Ms.push_back({m + tile, tile, 0});
  if (device_caps().wgmma)  // SPLIT tiles at batched-decode sizes, in place of the skinny kernel
    for (int tile : {8, 9})
      for (int64_t m : {17, 40, 64}) Ms.push_back({m, tile, 0});
  const int configs = testing::set_linear_skinny_override(0);
  for (int c = 1; c <= configs; ++c)
    for (int64_t m : {1, 2, 5, 8, 9, 12, 16}) Ms.push_back({m, 0, c});
  struct Reset {
    ~Reset() {
      testing::set_linear_tile_override(0);
      testing::set_linear_skinny_override(0);
    }
  } reset;
  int checked = 0, config_runs = 0, config_fits = 0;
  for (const auto& [M, tile, config] : Ms) {
    testing::set_linear_tile_override(tile);
    testing::set_linear_skinny_override(config);
    const int64_t start = (M * 37) % P;  // shifting offsets, different neighbours each time
    std::vector<float> xm(M * K);
    for (int64_t i = 0; i < M; ++i) {
      const int64_t r = (start + i) % P;
      std::copy(x.begin() + r * K, x.begin() + (r + 1) * K, xm.begin() + i * K);
    }
    DeviceBuffer<float> dxm(xm), dy(M * N);
    linear(dxm.get(), M, wt, bias, dy.get());
    if (config > 0 && testing::linear_skinny_config_used() == config) ++config_runs;
    if (config > 0 && testing::linear_skinny_config_runs(config, N, K, M)) ++config_fits;
    const auto y = dy.to_host();
    for (int64_t i = 0; i < M; ++i) {
      const int64_t r = (start + i) % P;
      ASSERT_TRUE(same_bits(y.data() + i * N, ref.data() + r * N, N))
          << "M=" << M << " tile " << tile << " config " << config << " ("
          << testing::linear_skinny_config_name(config) << ") row " << i << " (pool row " << r
          << ") differs from its M=1 result";
      ++checked;
    }
  }
  EXPECT_GT(checked, 800);
  // Every forced config ran wherever this device's shared memory holds it (and at M = 1 at least
  // on a Hopper with sm_90 code, where every config but the small-memory one fits).
  EXPECT_EQ(config_runs, config_fits);
  if (device_caps().smem_optin >= 227 * 1024 && device_caps().code_arch == 90) {
    EXPECT_GE(config_runs, (configs - 1) * 3);
  }
}

// Uniform bf16 in about [-scale, scale) from a xorshift (the lm_head's 622M weights would take
// the normal distribution many seconds).
std::vector<uint16_t> quick_bf16(size_t n, uint32_t seed, float scale = 0.05f) {
  std::vector<uint16_t> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    x = f32_to_bf16((static_cast<float>(s >> 8) / 8388608.0f - 1.0f) * scale);
  }
  return v;
}

Weight bf16_weight(const DeviceBuffer<uint16_t>& d, int64_t N, int64_t K) {
  Weight w;
  w.dtype = DType::BF16;
  w.rows = N;
  w.cols = K;
  w.data = d.get();
  return w;
}

// The wgmma kernel (M > 64 on the H200) on Qwen3-8B's shapes and the split-K shapes: every element
// bitwise what the mma.sync tiled kernel gives (which the test above ties to M = 1), under the
// kernel's own pick and every forced tile, and a few rows against M = 1 directly. Outputs are
// filled with other values first, so an element the kernel does not write shows.
TEST_F(CudaTest, LinearWgmmaMatchesMmaSyncOnModelShapes) {
  struct Shape {
    int64_t N, K;
    bool bias;
  };
  const Shape shapes[] = {{4096, 4096, false}, {1024, 4096, true},  {12288, 4096, false},
                          {4096, 12288, false}, {151936, 4096, false}, {200, 1040, true},
                          {8200, 512, true},    {333, 272, true},    {96, 4096, false}};
  struct Reset {
    ~Reset() { testing::set_linear_tile_override(0); }
  } reset;
  int checked = 0;
  for (const Shape& sh : shapes) {
    const int64_t N = sh.N, K = sh.K, P = 2048 + 1;
    DeviceBuffer<uint16_t> dw(quick_bf16(N * K, static_cast<uint32_t>(N + K)));
    DeviceBuffer<float> db(random_floats(N, 7));
    DeviceBuffer<float> dx(random_floats(P * K, static_cast<uint32_t>(K), -2.0f, 2.0f));
    const Weight wt = bf16_weight(dw, N, K);
    const float* bias = sh.bias ? db.get() : nullptr;
    for (int64_t M : {24, 64, 65, 100, 129, 200, 513, 2048}) {
      if (N > 100000 && M != 129 && M != 2048) continue;  // lm_head: two sizes (host time)
      DeviceBuffer<float> ref(M * N), y(M * N);
      testing::set_linear_tile_override(-1);
      linear(dx.get(), M, wt, bias, ref.get());
      const auto r = ref.to_host();
      for (int tile : wgmma_tiles_here()) {
        testing::set_linear_tile_override(-1);
        linear(dx.get() + K, M, wt, bias, y.get());  // other values first
        testing::set_linear_tile_override(tile);
        linear(dx.get(), M, wt, bias, y.get());
        const auto h = y.to_host();
        ASSERT_TRUE(same_bits(h.data(), r.data(), h.size()))
            << "N=" << N << " K=" << K << " M=" << M << " tile " << tile
            << ": the wgmma kernel differs from the mma.sync tiled kernel";
        ++checked;
        if (tile != 0) continue;
        testing::set_linear_tile_override(0);
        DeviceBuffer<float> one(N);
        for (int64_t i : {int64_t{0}, M / 2, M - 1}) {
          linear(dx.get() + i * K, 1, wt, bias, one.get());
          const auto o = one.to_host();
          ASSERT_TRUE(same_bits(o.data(), h.data() + i * N, N))
              << "N=" << N << " K=" << K << " M=" << M << " row " << i << " differs from M=1";
        }
      }
    }
  }
  EXPECT_GE(checked, static_cast<int>(wgmma_tiles_here().size()) * 45);
}

// linear_multi on the wgmma kernel (q/k/v, gate/up and the split-K sets): each output bitwise what
// linear() on the mma.sync tiled kernel gives for its weight alone.
TEST_F(CudaTest, LinearWgmmaMultiMatchesLinear) {
  struct Set {
    int64_t K;
    std::vector<int64_t> Ns;
  };
  const std::vector<Set> sets = {
      {4096, {4096, 1024, 1024}}, {4096, {12288, 12288}}, {1040, {320, 64, 72}},
      {512, {8200, 8192}},        {272, {333, 40}},
  };
  struct Reset {
    ~Reset() { testing::set_linear_tile_override(0); }
  } reset;
  int checked = 0;
  for (const Set& set : sets) {
    const int64_t K = set.K, P = 2048 + 1;
    std::vector<DeviceBuffer<uint16_t>> dw;
    std::vector<DeviceBuffer<float>> db;
    std::vector<Weight> wts;
    for (size_t i = 0; i < set.Ns.size(); ++i) {
      dw.emplace_back(quick_bf16(set.Ns[i] * K, 270 + static_cast<uint32_t>(i)));
      db.emplace_back(random_floats(set.Ns[i], 280 + static_cast<uint32_t>(i)));
      wts.push_back(bf16_weight(dw.back(), set.Ns[i], K));
    }
    DeviceBuffer<float> dx(random_floats(P * K, 290, -2.0f, 2.0f));
    for (int64_t M : {24, 64, 65, 129, 513, 2048}) {
      std::vector<std::vector<float>> refs;
      testing::set_linear_tile_override(-1);
      for (size_t i = 0; i < wts.size(); ++i) {
        DeviceBuffer<float> r(M * wts[i].rows);
        linear(dx.get(), M, wts[i], i % 2 == 0 ? db[i].get() : nullptr, r.get());
        refs.push_back(r.to_host());
      }
      for (int tile : wgmma_tiles_here()) {
        testing::set_linear_tile_override(tile);
        std::vector<DeviceBuffer<float>> ys;
        std::vector<LinearOut> outs;
        for (size_t i = 0; i < wts.size(); ++i) {
          ys.emplace_back(M * wts[i].rows);
          outs.push_back({&wts[i], i % 2 == 0 ? db[i].get() : nullptr, ys.back().get()});
        }
        testing::set_linear_tile_override(-1);  // other values first: unwritten elements show
        linear_multi(dx.get() + K, M, outs.data(), static_cast<int64_t>(outs.size()));
        testing::set_linear_tile_override(tile);
        linear_multi(dx.get(), M, outs.data(), static_cast<int64_t>(outs.size()));
        for (size_t i = 0; i < wts.size(); ++i) {
          const auto y = ys[i].to_host();
          ASSERT_TRUE(same_bits(y.data(), refs[i].data(), y.size()))
              << "K=" << K << " weight " << i << " (N=" << wts[i].rows << ") M=" << M << " tile "
              << tile << ": linear_multi (wgmma) differs from linear (mma.sync)";
          ++checked;
        }
      }
    }
  }
  EXPECT_GE(checked, static_cast<int>(wgmma_tiles_here().size()) * 4 * 12);
}

// linear_multi under every M <= 16 config: each output bitwise what linear() (the rule's config)
// gives for its weight alone, for launches of S = 4, 2 and 1, weights with and without bias.
TEST_F(CudaTest, LinearSkinnyConfigsMultiMatchLinear) {
  struct Set {
    int64_t K;
    std::vector<int64_t> Ns;
  };
  const std::vector<Set> sets = {
      {1040, {320, 64, 72}},  // S 4 (Ks 272: a partial last chunk for every BK)
      {4096, {256, 40}},      // S 4, Ks 1024
      {512, {8200, 8192}},    // S 2
      {272, {333, 40}},       // S 1
  };
  const int configs = testing::set_linear_skinny_override(0);
  struct Reset {
    ~Reset() { testing::set_linear_skinny_override(0); }
  } reset;
  int checked = 0;
  for (const Set& set : sets) {
    const int64_t K = set.K, P = 40;
    std::vector<DeviceBuffer<uint16_t>> dw;
    std::vector<DeviceBuffer<float>> db;
    std::vector<Weight> wts;
    for (size_t i = 0; i < set.Ns.size(); ++i) {
      dw.emplace_back(random_bf16(set.Ns[i] * K, 170 + static_cast<uint32_t>(i)));
      db.emplace_back(random_floats(set.Ns[i], 180 + static_cast<uint32_t>(i)));
      Weight w;
      w.dtype = DType::BF16;
      w.rows = set.Ns[i];
      w.cols = K;
      w.data = dw.back().get();
      wts.push_back(w);
    }
    const auto x = random_floats(P * K, 190, -2.0f, 2.0f);
    DeviceBuffer<float> dx(x);
    for (int64_t M : {1, 3, 8, 11, 16}) {
      const float* xm = dx.get() + ((M * 7) % (P - M + 1)) * K;
      std::vector<DeviceBuffer<float>> refs;
      testing::set_linear_skinny_override(0);
      for (size_t i = 0; i < wts.size(); ++i) {
        refs.emplace_back(M * wts[i].rows);
        linear(xm, M, wts[i], i % 2 == 0 ? db[i].get() : nullptr, refs.back().get());
      }
      for (int c = 1; c <= configs; ++c) {
        testing::set_linear_skinny_override(c);
        std::vector<DeviceBuffer<float>> ys;
        std::vector<LinearOut> outs;
        for (size_t i = 0; i < wts.size(); ++i) {
          ys.emplace_back(M * wts[i].rows);
          outs.push_back({&wts[i], i % 2 == 0 ? db[i].get() : nullptr, ys.back().get()});
        }
        linear_multi(xm, M, outs.data(), static_cast<int64_t>(outs.size()));
        for (size_t i = 0; i < wts.size(); ++i) {
          const auto y = ys[i].to_host(), r = refs[i].to_host();
          ASSERT_TRUE(same_bits(y.data(), r.data(), y.size()))
              << "K=" << K << " weight " << i << " (N=" << wts[i].rows << ") M=" << M
              << " config " << c << " (" << testing::linear_skinny_config_name(c)
              << "): linear_multi differs from linear";
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST_P(LinearTest, MatchesReferences) {
  const auto [N, K, with_bias] = GetParam();
  const auto w = random_bf16(N * K, 21);
  const auto b = random_floats(N, 22);
  DeviceBuffer<uint16_t> dw(w);
  DeviceBuffer<float> db(b);
  Weight dev_w;
  dev_w.dtype = DType::BF16;
  dev_w.rows = N;
  dev_w.cols = K;
  dev_w.data = dw.get();
  Weight host_w = dev_w;
  host_w.data = w.data();
  ThreadPool pool(2);
  for (int64_t M : {1, 3, 8, 9, 16, 17, 33, 64, 65, 130}) {
    const auto x = random_floats(M * K, 100 + static_cast<uint32_t>(M), -2.0f, 2.0f);
    DeviceBuffer<float> dx(x), dy(M * N);
    linear(dx.get(), M, dev_w, with_bias ? db.get() : nullptr, dy.get());
    const auto y = dy.to_host();
    std::vector<float> cpu(M * N);
    kernels::linear(x.data(), M, host_w, with_bias ? b.data() : nullptr, cpu.data(), pool);
    double worst_cpu = 0, worst_exact = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double exact = with_bias ? b[n] : 0.0, scale = 0.0;
        for (int64_t k = 0; k < K; ++k) {
          const double xb = bf16_to_f32(f32_to_bf16(x[m * K + k]));
          const double wv = bf16_to_f32(w[n * K + k]);
          exact += xb * wv;
          scale += std::fabs(x[m * K + k] * wv);
        }
        scale += 1e-6;
        const double g = y[m * N + n];
        worst_cpu = std::max(worst_cpu, std::fabs(g - cpu[m * N + n]) / scale);
        worst_exact = std::max(worst_exact, std::fabs(g - exact) / scale);
      }
    EXPECT_LT(worst_cpu, 1e-2) << "M=" << M << " vs CPU kernels::linear";
    EXPECT_LT(worst_exact, 1e-4) << "M=" << M << " vs float64 with bf16-rounded x";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearTest,
                         ::testing::Values(LinearCase{200, 1040, true}, LinearCase{96, 4096, false},
                                           LinearCase{333, 272, true}, LinearCase{8200, 512, true}));

// numerics fast (cuBLAS): close to the float64 reference; skipped where cuBLAS cannot be loaded.
TEST_F(CudaTest, LinearFastMatchesReference) {
  std::string why;
  if (!linear_fast_available(&why)) GTEST_SKIP() << "cuBLAS not loadable: " << why;
  const int64_t N = 300, K = 1024;
  const auto w = random_bf16(N * K, 31);
  const auto b = random_floats(N, 32);
  DeviceBuffer<uint16_t> dw(w);
  DeviceBuffer<float> db(b);
  Weight wt;
  wt.dtype = DType::BF16;
  wt.rows = N;
  wt.cols = K;
  wt.data = dw.get();
  for (int64_t M : {1, 8, 77, 300}) {
    const auto x = random_floats(M * K, 200 + static_cast<uint32_t>(M), -2.0f, 2.0f);
    DeviceBuffer<float> dx(x), dy(M * N);
    linear_fast(dx.get(), M, wt, db.get(), dy.get());
    const auto y = dy.to_host();
    double worst = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double exact = b[n], scale = 1e-6;
        for (int64_t k = 0; k < K; ++k) {
          const double xb = bf16_to_f32(f32_to_bf16(x[m * K + k]));
          const double wv = bf16_to_f32(w[n * K + k]);
          exact += xb * wv;
          scale += std::fabs(xb * wv);
        }
        worst = std::max(worst, std::fabs(y[m * N + n] - exact) / scale);
      }
    EXPECT_LT(worst, 1e-4) << "M=" << M;
  }
}

TEST_F(CudaTest, LinearRejectsKNotMultipleOf16) {
  DeviceBuffer<uint16_t> dw(8 * 24);
  DeviceBuffer<float> dx(24), dy(8);
  Weight wt;
  wt.dtype = DType::BF16;
  wt.rows = 8;
  wt.cols = 24;
  wt.data = dw.get();
  EXPECT_THROW(linear(dx.get(), 1, wt, nullptr, dy.get()), Error);
  wt.dtype = DType::F32;
  wt.cols = 16;
  EXPECT_THROW(linear(dx.get(), 1, wt, nullptr, dy.get()), Error);
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
