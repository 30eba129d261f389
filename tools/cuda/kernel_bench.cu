// Microbenchmarks of the CUDA kernels (cuda_ops.h) on Qwen3-8B shapes. Weights and KV caches are
// rotated over several copies (> 2x the 60 MB L2) so every timed call reads from HBM. Two times
// per case, after warm-up: "dev" = the calls captured once into a CUDA graph and replayed, timed
// with events (device time, launch gaps of a graph only); "wall" = host clock over a batch of
// plainly enqueued calls (includes the host's launch cost, about 3 us a kernel on that machine).
//   cuda_bench            all benchmarks
//   cuda_bench linear-sweep   every M <= 16 linear config per decode shape (not in "all")
//   cuda_bench linear-batch   the decode-step linears at batched M (16..256), every kernel choice
//   cuda_bench linear-prefill the M > 64 kernels (mma.sync, wgmma tiles, cuBLAS) at M 512, 2048
//   cuda_bench attention-prefill  causal prefill attention (the walk)
//   cuda_bench linear-quant   quantized (8/4-bit, group 64) decode linears under every M <= 16
//                             config, against BF16 (not in "all")
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/linear_quant_testing.h"

using namespace lockstep;
using namespace lockstep::kernels;
namespace kc = lockstep::kernels::cuda;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Timing {
  double dev, wall;  // seconds per call
};

void ck(cudaError_t e, const char* what) { kc::detail::check(e, what); }

template <typename F>
Timing time_per_call(F&& f, int iters) {
  for (int i = 0; i < 3; ++i) f(i);
  kc::synchronize();
  const double t0 = now();
  for (int i = 0; i < iters; ++i) f(i);
  kc::synchronize();
  const double wall = (now() - t0) / iters;
  cudaStream_t s = kc::detail::stream();
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ck(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (int i = 0; i < iters; ++i) f(i);
  ck(cudaStreamEndCapture(s, &graph), "end capture");
  ck(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  ck(cudaGraphLaunch(exec, s), "graph launch");
  cudaEvent_t e0, e1;
  ck(cudaEventCreate(&e0), "event");
  ck(cudaEventCreate(&e1), "event");
  const int reps = 3;
  ck(cudaEventRecord(e0, s), "record");
  for (int r = 0; r < reps; ++r) ck(cudaGraphLaunch(exec, s), "graph launch");
  ck(cudaEventRecord(e1, s), "record");
  ck(cudaEventSynchronize(e1), "event sync");
  float ms = 0;
  ck(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return {ms * 1e-3 / (reps * iters), wall};
}

std::vector<uint16_t> host_bf16(size_t n) {
  std::vector<uint16_t> v(n);
  uint32_t s = 12345;
  for (auto& x : v) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    x = f32_to_bf16((static_cast<float>(s & 0xffff) / 65536.0f - 0.5f) * 0.1f);
  }
  return v;
}

void bench_linear() {
  struct S {
    int64_t N, K;
    const char* name;
  };
  const S shapes[] = {{4096, 4096, "o_proj 4096x4096"},
                      {1024, 4096, "k/v 1024x4096"},
                      {6144, 4096, "qkv 6144x4096"},
                      {12288, 4096, "fused qkv-like 12288x4096"},
                      {24576, 4096, "gate/up 24576x4096"},
                      {4096, 12288, "down 4096x12288"},
                      {151936, 4096, "lm_head 151936x4096"}};
  const int64_t Ms[] = {1, 2, 4, 8, 16, 32, 64};
  std::string why;
  const bool fast = kc::linear_fast_available(&why);
  if (!fast) std::printf("linear_fast (cuBLAS) unavailable: %s\n", why.c_str());
  std::printf("\n== linear (BF16 weights, FP32 x/y); GB/s = weight bytes / time; HBM 4.8 TB/s ==\n");
  std::vector<uint16_t> host = host_bf16(151936LL * 4096);
  std::vector<float> hx(2048LL * 12288);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = std::sin(0.001 * static_cast<double>(i));
  float* x = static_cast<float*>(kc::malloc_device(hx.size() * 4));
  kc::upload(x, hx.data(), hx.size() * 4);
  float* y = static_cast<float*>(kc::malloc_device(2048LL * 151936 * 4));
  for (const S& s : shapes) {
    const size_t bytes = static_cast<size_t>(s.N * s.K * 2);
    const int copies = static_cast<int>(std::max<size_t>(1, (512ull << 20) / bytes));
    std::vector<void*> ws(copies);
    for (auto& p : ws) {
      p = kc::malloc_device(bytes);
      kc::upload(p, host.data(), bytes);
    }
    auto run = [&](int64_t M, bool use_fast, int iters) {
      return time_per_call(
          [&](int i) {
            Weight w;
            w.dtype = DType::BF16;
            w.rows = s.N;
            w.cols = s.K;
            w.data = ws[i % copies];
            if (use_fast) kc::linear_fast(x, M, w, nullptr, y);
            else kc::linear(x, M, w, nullptr, y);
          },
          iters);
    };
    for (int64_t M : Ms) {
      if (M != 1 && M != 8 && M != 64) continue;  // decode and verify widths (budget)
      const Timing tm = run(M, false, std::max(20, copies * 4));
      const double t = tm.dev;
      std::printf("linear %-26s M=%-5lld dev %8.2f us %6.0f GB/s %5.1f%% of 4.8 TB/s %6.1f TFLOP/s | wall %8.2f us",
                  s.name, static_cast<long long>(M), t * 1e6, bytes / t / 1e9,
                  100.0 * bytes / t / 4.8e12, 2.0 * M * s.N * s.K / t / 1e12, tm.wall * 1e6);
      if (fast && M <= 8) {
        const Timing tf = run(M, true, std::max(20, copies * 4));
        std::printf(" | cuBLAS %8.2f us, exact/fast time %.2f", tf.dev * 1e6, t / tf.dev);
      }
      std::printf("\n");
    }
    for (int64_t M : {128, 256, 512, 2048}) {
      const int iters = s.N > 24576 ? 4 : 10;
      const Timing tm = run(M, false, iters);
      const double t = tm.dev;
      std::printf("linear %-26s M=%-5lld dev %8.2f us %7.1f TFLOP/s | wall %8.2f us", s.name,
                  static_cast<long long>(M), t * 1e6, 2.0 * M * s.N * s.K / t / 1e12, tm.wall * 1e6);
      if (fast && (M == 2048 || M == 128)) {
        const Timing tf = run(M, true, iters);
        std::printf(" | cuBLAS %8.2f us %7.1f TFLOP/s, exact/fast time %.2f", tf.dev * 1e6,
                    2.0 * M * s.N * s.K / tf.dev / 1e12, t / tf.dev);
      }
      std::printf("\n");
    }
    for (auto p : ws) kc::free_device(p);
  }
  kc::free_device(x);
  kc::free_device(y);
}

// linear-sweep: every M <= 16 configuration of the skinny linear kernel (forced through
// kc::testing::set_linear_skinny_override), then the rule's own pick, on each decode launch of
// Qwen3-8B and Qwen3-0.6B (one weight, or q/k/v and gate/up as one linear_multi launch) and a few
// square shapes, at M = 1, 4, 16. GB/s = weight bytes / device time of a replayed graph; the
// weights rotate through a 1.5 GiB pool, so every call reads them from HBM. A '-' is a config
// whose shared memory does not fit that M.
__global__ void sweep_fill_bf16(uint16_t* p, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = static_cast<uint16_t>((h & 0x8000u) | 0x3c00u | (h & 0x7fu));  // +-[1, 2) * 2^-7
  }
}

// The sweeps' buffers: a 1.5 GiB pool of weights (BF16 values in +-[1, 2) * 2^-7; a sweep
// rotates its launches' weights through it so every call reads from HBM), x for up to 16 tokens
// of up to 12288 k, and y for up to 16 x 151936 outputs.
struct SweepBuffers {
  static constexpr size_t kPoolBytes = size_t{3} << 29;
  static constexpr int64_t kMaxM = 16, kMaxK = 12288, kMaxN = 151936;
  uint16_t* pool = nullptr;
  float* x = nullptr;
  float* y = nullptr;
  SweepBuffers() {
    pool = static_cast<uint16_t*>(kc::malloc_device(kPoolBytes));
    sweep_fill_bf16<<<2048, 256, 0, kc::detail::stream()>>>(pool, kPoolBytes / 2);
    ck(cudaGetLastError(), "fill");
    std::vector<float> hx(kMaxM * kMaxK);
    for (size_t i = 0; i < hx.size(); ++i) hx[i] = std::sin(0.001 * static_cast<double>(i));
    x = static_cast<float*>(kc::malloc_device(hx.size() * 4));
    kc::upload(x, hx.data(), hx.size() * 4);
    y = static_cast<float*>(kc::malloc_device(kMaxM * kMaxN * 4));
    kc::synchronize();
  }
  ~SweepBuffers() {
    kc::free_device(pool);
    kc::free_device(x);
    kc::free_device(y);
  }
  SweepBuffers(const SweepBuffers&) = delete;
  SweepBuffers& operator=(const SweepBuffers&) = delete;
};

// Device seconds per call of f(i), i = 0..iters-1 captured into one graph (one warm replay, then
// the mean of 3).
template <typename F>
double graph_time(F&& f, int iters) {
  cudaStream_t s = kc::detail::stream();
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ck(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (int i = 0; i < iters; ++i) f(i);
  ck(cudaStreamEndCapture(s, &graph), "end capture");
  ck(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  ck(cudaGraphLaunch(exec, s), "graph launch");
  cudaEvent_t e0, e1;
  ck(cudaEventCreate(&e0), "event");
  ck(cudaEventCreate(&e1), "event");
  const int reps = 3;
  ck(cudaEventRecord(e0, s), "record");
  for (int r = 0; r < reps; ++r) ck(cudaGraphLaunch(exec, s), "graph launch");
  ck(cudaEventRecord(e1, s), "record");
  ck(cudaEventSynchronize(e1), "event sync");
  float ms = 0;
  ck(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return ms * 1e-3 / (reps * iters);
}

// Call i of a sweep: the launch's weights (one, or several for linear_multi, Ns rows of K each,
// side by side) at the i-th offset of a rotating window over `pool`, so every call reads HBM.
void pool_launch(const uint16_t* pool, size_t pool_bytes, size_t span_al, int i,
                 const std::vector<int64_t>& Ns, int64_t K, const float* x, int64_t M, float* y) {
  const size_t room = pool_bytes - span_al;
  const size_t off = room == 0 ? 0 : (static_cast<size_t>(i) * span_al) % room / 256 * 256;
  const auto* base = reinterpret_cast<const uint8_t*>(pool) + off;
  Weight ws[4];
  LinearOut outs[4];
  float* yp = y;
  for (size_t j = 0; j < Ns.size(); ++j) {
    ws[j].dtype = DType::BF16;
    ws[j].rows = Ns[j];
    ws[j].cols = K;
    ws[j].data = base;
    base += Ns[j] * K * 2;
    outs[j] = {&ws[j], nullptr, yp};
    yp += M * Ns[j];
  }
  if (Ns.size() == 1) kc::linear(x, M, ws[0], nullptr, y);
  else kc::linear_multi(x, M, outs, static_cast<int64_t>(Ns.size()));
}

void bench_linear_sweep() {
  struct Shape {
    const char* name;
    int64_t K;
    std::vector<int64_t> Ns;  // one launch: linear (one N) or linear_multi
    int per_step;             // launches per Qwen3-8B decode step (0: not an 8B shape)
  };
  const std::vector<Shape> shapes = {
      {"8B q/k/v", 4096, {4096, 1024, 1024}, 36}, {"8B o_proj", 4096, {4096}, 36},
      {"8B gate/up", 4096, {12288, 12288}, 36},   {"8B down", 12288, {4096}, 36},
      {"8B lm_head", 4096, {151936}, 1},          {"0.6B q/k/v", 1024, {2048, 1024, 1024}, 0},
      {"0.6B o_proj", 2048, {1024}, 0},           {"0.6B gate/up", 1024, {3072, 3072}, 0},
      {"0.6B down", 3072, {1024}, 0},             {"0.6B lm_head", 1024, {151936}, 0},
      {"1024x1024", 1024, {1024}, 0},             {"2048x2048", 2048, {2048}, 0},
      {"3072x3072", 3072, {3072}, 0},             {"1024x4096", 4096, {1024}, 0},
  };
  const int n_cfg = kc::testing::set_linear_skinny_override(0);
  std::printf("\n== linear-sweep: M <= 16 skinny configs (rows per block/k per stage/stages), "
              "GB/s of weights ==\n");
  for (int c = 1; c <= n_cfg; ++c)
    std::printf("  c%-2d %s\n", c, kc::testing::linear_skinny_config_name(c).c_str());
  const SweepBuffers buf;
  const size_t pool_bytes = SweepBuffers::kPoolBytes;
  const uint16_t* pool = buf.pool;
  const float* x = buf.x;
  float* y = buf.y;

  const int64_t Ms[] = {1, 4, 16};
  // Per M: the 8B decode step's linears (sum of per_step x time) for config 1, the best config
  // per shape, and the rule.
  double step_c1[3] = {}, step_best[3] = {}, step_rule[3] = {};
  for (const Shape& sh : shapes) {
    size_t span = 0;
    for (int64_t N : sh.Ns) span += static_cast<size_t>(N * sh.K * 2);
    const size_t span_al = (span + 255) / 256 * 256;
    const int iters = static_cast<int>(std::min<size_t>(200, std::max<size_t>(8, (size_t{2} << 30) / span)));
    for (int mi = 0; mi < 3; ++mi) {
      const int64_t M = Ms[mi];
      auto call = [&](int i) { pool_launch(pool, pool_bytes, span_al, i, sh.Ns, sh.K, x, M, y); };
      std::printf("%-13s M=%-2lld", sh.name, static_cast<long long>(M));
      double best = 1e30, t1 = 0;
      int best_c = 0;
      for (int c = 1; c <= n_cfg; ++c) {
        kc::testing::set_linear_skinny_override(c);
        double t = 0;
        try {
          call(0);
          kc::synchronize();
          if (kc::testing::linear_skinny_config_used() != c) {
            std::printf("     -");
            continue;
          }
          t = graph_time(call, iters);
        } catch (const std::exception& e) {
          cudaGraph_t g = nullptr;
          cudaStreamEndCapture(kc::detail::stream(), &g);  // drop a broken capture
          if (g) cudaGraphDestroy(g);
          cudaGetLastError();
          std::printf("   ERR");
          std::fprintf(stderr, "\nconfig %d: %s\n", c, e.what());
          continue;
        }
        if (c == 1) t1 = t;
        if (t < best) best = t, best_c = c;
        std::printf(" %5.0f", span / t / 1e9);
      }
      kc::testing::set_linear_skinny_override(0);
      call(0);
      kc::synchronize();
      const int rule_c = kc::testing::linear_skinny_config_used();
      const double tr = graph_time(call, iters);
      std::printf(" | best c%d %.2f us %.0f GB/s (%.0f%% of 4.8) | rule c%d %.2f us %.0f GB/s\n",
                  best_c, best * 1e6, span / best / 1e9, 100.0 * span / best / 4.8e12, rule_c,
                  tr * 1e6, span / tr / 1e9);
      step_c1[mi] += sh.per_step * t1;
      step_best[mi] += sh.per_step * best;
      step_rule[mi] += sh.per_step * tr;
    }
  }
  for (int mi = 0; mi < 3; ++mi)
    std::printf("8B decode step linears, M=%lld: config 1 %.0f us, best per shape %.0f us, rule %.0f us\n",
                static_cast<long long>(Ms[mi]), step_c1[mi] * 1e6, step_best[mi] * 1e6,
                step_rule[mi] * 1e6);
}

// linear-batch: the Qwen3-8B decode-step linears (q/k/v and gate/up as one linear_multi launch) at
// batched-decode sizes M = 16..256, each kernel choice forced in turn (the same bits, tests prove
// it): "skinny" (M <= 64), the unsplit wgmma tiles 6 (128 tokens) and 7 (192), the SPLIT wgmma
// tiles 8 (64 tokens, one piece each) and 9 (128), and the rule. Device time of a replayed graph,
// weights rotated through the 1.5 GiB pool; per M, the step's linears summed (36 layers + lm_head).
void bench_linear_batch() {
  struct Shape {
    const char* name;
    int64_t K;
    std::vector<int64_t> Ns;
    int per_step;
  };
  const std::vector<Shape> shapes = {{"8B q/k/v", 4096, {4096, 1024, 1024}, 36},
                                     {"8B o_proj", 4096, {4096}, 36},
                                     {"8B gate/up", 4096, {12288, 12288}, 36},
                                     {"8B down", 12288, {4096}, 36},
                                     {"8B lm_head", 4096, {151936}, 1}};
  const SweepBuffers buf;
  const int64_t kMaxM = 256;
  std::vector<float> hx(kMaxM * 12288);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = std::sin(0.0007 * static_cast<double>(i));
  float* x = static_cast<float*>(kc::malloc_device(hx.size() * 4));
  kc::upload(x, hx.data(), hx.size() * 4);
  float* y = static_cast<float*>(kc::malloc_device(kMaxM * 151936 * 4));
  struct Variant {
    const char* name;
    int tile;  // set_linear_tile_override: 1 = skinny at M <= 64 (mma.sync tile above), 6..9 wgmma
  };
  const Variant variants[] = {{"rule", 0}, {"skinny", 1}, {"wg128", 6}, {"wg192", 7},
                              {"split64", 8}, {"split128", 9}};
  std::printf("\n== linear-batch: 8B decode linears at batched M, GB/s of weights (us per step) ==\n");
  std::printf("%-11s %-5s", "shape", "M");
  for (const Variant& v : variants) std::printf(" %14s", v.name);
  std::printf("\n");
  const int64_t Ms[] = {16, 32, 48, 64, 96, 128, 192, 256};
  std::vector<double> step(std::size(Ms) * std::size(variants), 0.0);
  for (const Shape& sh : shapes) {
    size_t span = 0;
    for (int64_t N : sh.Ns) span += static_cast<size_t>(N * sh.K * 2);
    const size_t span_al = (span + 255) / 256 * 256;
    const int iters = static_cast<int>(std::min<size_t>(100, std::max<size_t>(4, (size_t{2} << 30) / span)));
    for (size_t mi = 0; mi < std::size(Ms); ++mi) {
      const int64_t M = Ms[mi];
      auto call = [&](int i) {
        pool_launch(buf.pool, SweepBuffers::kPoolBytes, span_al, i, sh.Ns, sh.K, x, M, y);
      };
      std::printf("%-11s %-5lld", sh.name, static_cast<long long>(M));
      for (size_t vi = 0; vi < std::size(variants); ++vi) {
        const int tile = variants[vi].tile;
        if ((tile == 1 && M > 64) || ((tile == 6 || tile == 7) && M <= 64)) {
          std::printf(" %14s", "-");
          continue;
        }
        kc::testing::set_linear_tile_override(tile);
        call(0);
        kc::synchronize();
        const double t = graph_time(call, iters);
        step[mi * std::size(variants) + vi] += sh.per_step * t;
        std::printf(" %6.0f %7.1f", span / t / 1e9, t * 1e6);
      }
      kc::testing::set_linear_tile_override(0);
      std::printf("\n");
    }
  }
  std::printf("8B decode step, all linears (ms): M");
  for (const Variant& v : variants) std::printf(" %9s", v.name);
  std::printf("\n");
  for (size_t mi = 0; mi < std::size(Ms); ++mi) {
    std::printf("  M=%-4lld", static_cast<long long>(Ms[mi]));
    for (size_t vi = 0; vi < std::size(variants); ++vi) {
      const double t = step[mi * std::size(variants) + vi];
      if (t > 0) std::printf(" %9.3f", t * 1e3);
      else std::printf(" %9s", "-");
    }
    std::printf("\n");
  }
  kc::free_device(x);
  kc::free_device(y);
}

// linear-quant: the Qwen3-8B decode linears (one weight a launch, as the quantized path runs
// them) with BF16 weights (the rule's config) and with 8-bit and 4-bit affine weights (group 64,
// BF16 scale/bias pairs) under every M <= 16 quantized config
// (kc::testing::set_linear_quant_config) and the rule. Device time of a replayed graph; the
// weights rotate through a 1.5 GiB pool, so every call reads them from HBM. GB/s = bytes of
// weights read (codes + pairs) / time. A '-' is a config whose shared memory does not fit.
//   cuda_bench linear-quant [n]: configs 1..n only
void bench_linear_quant(int max_cfg) {
  struct Shape {
    const char* name;
    int64_t N, K;
    int per_step;  // launches per 8B decode step
  };
  const Shape shapes[] = {{"q 4096x4096", 4096, 4096, 36},     {"k/v 1024x4096", 1024, 4096, 72},
                          {"o 4096x4096", 4096, 4096, 36},     {"gate/up 12288x4096", 12288, 4096, 72},
                          {"down 4096x12288", 4096, 12288, 36}, {"lm_head 151936x4096", 151936, 4096, 1}};
  int n_cfg = kc::testing::set_linear_quant_config(0);
  if (max_cfg > 0 && max_cfg < n_cfg) n_cfg = max_cfg;
  std::printf("\n== linear-quant: M <= 16 quantized configs; us (GB/s of codes + pairs) ==\n");
  for (int c = 1; c <= n_cfg; ++c)
    std::printf("  c%-2d %s\n", c, kc::testing::linear_quant_config_name(c).c_str());
  const SweepBuffers buf;
  const size_t pool_bytes = SweepBuffers::kPoolBytes;
  const uint16_t* pool = buf.pool;
  const float* x = buf.x;
  float* y = buf.y;
  const int64_t Ms[] = {1, 4, 16};
  constexpr int kW = 3;  // 0 = BF16, 1 = 8-bit, 2 = 4-bit
  // Per M and width: the 8B step's linears (sum of per_step x time) by rule, and best per shape.
  double step_rule[3][kW] = {}, step_best[3][kW] = {};
  for (const Shape& sh : shapes) {
    for (int mi = 0; mi < 3; ++mi) {
      const int64_t M = Ms[mi];
      for (int wi = 0; wi < kW; ++wi) {
        const int bits = wi == 0 ? 16 : (wi == 1 ? 8 : 4);
        const size_t code_bytes = static_cast<size_t>(sh.N * sh.K * bits / 8);
        const size_t pair_bytes = wi == 0 ? 0 : static_cast<size_t>(sh.N * (sh.K / 64) * 4);
        const size_t span = code_bytes + pair_bytes;
        const size_t span_al = (span + 511) / 512 * 512;
        const int iters =
            static_cast<int>(std::min<size_t>(200, std::max<size_t>(8, (size_t{2} << 30) / span)));
        auto call = [&](int i) {
          const size_t room = pool_bytes - span_al;
          const size_t off = room == 0 ? 0 : (static_cast<size_t>(i) * span_al) % room / 512 * 512;
          const auto* base = reinterpret_cast<const uint8_t*>(pool) + off;
          Weight w;
          w.rows = sh.N;
          w.cols = sh.K;
          w.data = base;
          if (wi == 0) {
            w.dtype = DType::BF16;
          } else {
            w.quant = QuantFormat::Affine;
            w.bits = bits;
            w.group_size = 64;
            w.scale_dtype = DType::BF16;
            w.scales = base + (code_bytes + 255) / 256 * 256;
          }
          kc::linear(x, M, w, nullptr, y);
        };
        std::printf("%-20s M=%-2lld %-4s", sh.name, static_cast<long long>(M),
                    wi == 0 ? "bf16" : (wi == 1 ? "q8" : "q4"));
        auto timed = [&](int c, int* used) -> double {
          kc::testing::set_linear_quant_config(c);
          try {
            call(0);
            kc::synchronize();
            *used = kc::testing::linear_quant_config_used();
            if (c > 0 && *used != c) return -1;
            return graph_time(call, iters);
          } catch (const std::exception& e) {
            cudaGraph_t g = nullptr;
            cudaStreamEndCapture(kc::detail::stream(), &g);  // drop a broken capture
            if (g) cudaGraphDestroy(g);
            cudaGetLastError();
            std::fprintf(stderr, "\nconfig %d: %s\n", c, e.what());
            return -2;
          }
        };
        int used = 0;
        const double tr = timed(0, &used);
        const int rule_c = wi == 0 ? 0 : used;
        std::printf(" rule c%-2d %8.2f us %5.0f GB/s |", rule_c, tr * 1e6, span / tr / 1e9);
        double best = tr;
        int best_c = rule_c;
        if (wi != 0) {
          for (int c = 1; c <= n_cfg; ++c) {
            const double t = timed(c, &used);
            if (t == -1) {
              std::printf("      -");
              continue;
            }
            if (t < 0) {
              std::printf("    ERR");
              continue;
            }
            if (t < best) best = t, best_c = c;
            std::printf(" %6.2f", t * 1e6);
          }
          std::printf(" | best c%d %.2f us %.0f GB/s (%.0f%% of 4.8 TB/s)", best_c, best * 1e6,
                      span / best / 1e9, 100.0 * span / best / 4.8e12);
        }
        std::printf("\n");
        step_rule[mi][wi] += sh.per_step * tr;
        step_best[mi][wi] += sh.per_step * best;
      }
    }
  }
  kc::testing::set_linear_quant_config(0);
  for (int mi = 0; mi < 3; ++mi)
    std::printf("8B decode step linears, M=%lld: bf16 %.0f us | q8 rule %.0f us, best per shape %.0f us | "
                "q4 rule %.0f us, best per shape %.0f us\n",
                static_cast<long long>(Ms[mi]), step_rule[mi][0] * 1e6, step_rule[mi][1] * 1e6,
                step_best[mi][1] * 1e6, step_rule[mi][2] * 1e6, step_best[mi][2] * 1e6);
}

// Attention over a paged BF16 cache (kKvDtype) of `ctx` positions (block 16): T = 1 and 8 are decode and
// verify (the last T positions), T = ctx a causal prefill of the whole context. Decode reports
// the KV bytes read once over the time; prefill the FLOPs of q.k and p.v over the causal keys
// (4 * head_dim * heads * sum of n_keys) over the time.
void bench_attention_shape(int64_t n_heads, int64_t n_kv, int64_t hd, const char* name,
                           const std::vector<std::pair<int64_t, std::vector<int64_t>>>& cases) {
  const int64_t bt = 16, layers = 8;
  std::printf("\n== attention (%s: %lld q heads, %lld kv heads, head_dim %lld, block 16) ==\n", name,
              static_cast<long long>(n_heads), static_cast<long long>(n_kv), static_cast<long long>(hd));
  for (const auto& [ctx, Ts] : cases) {
    const int64_t blocks = (ctx + bt - 1) / bt;
    const size_t kv_floats = static_cast<size_t>(blocks * bt * n_kv * hd);
    static_assert(kc::kKvDtype == lockstep::DType::BF16, "a BF16 cache");
    std::vector<uint16_t> hk(kv_floats);
    for (size_t i = 0; i < kv_floats; ++i)
      hk[i] = lockstep::f32_to_bf16(static_cast<float>(std::cos(0.37 * static_cast<double>(i % 10007))));
    std::vector<uint16_t*> ks(layers), vs(layers);
    for (int64_t l = 0; l < layers; ++l) {
      ks[l] = static_cast<uint16_t*>(kc::malloc_device(kv_floats * 2));
      vs[l] = static_cast<uint16_t*>(kc::malloc_device(kv_floats * 2));
      kc::upload(ks[l], hk.data(), kv_floats * 2);
      kc::upload(vs[l], hk.data(), kv_floats * 2);
    }
    for (int64_t T : Ts) {
      std::vector<int32_t> table(T * blocks), nk(T);
      double keys = 0;
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t b = 0; b < blocks; ++b) table[t * blocks + b] = static_cast<int32_t>(b);
        nk[t] = static_cast<int32_t>(ctx - T + 1 + t);  // the last T positions, causal
        keys += nk[t];
      }
      std::vector<float> hq(T * n_heads * hd);
      for (size_t i = 0; i < hq.size(); ++i) hq[i] = std::sin(0.01 * static_cast<double>(i));
      auto* q = static_cast<float*>(kc::malloc_device(hq.size() * 4));
      auto* out = static_cast<float*>(kc::malloc_device(hq.size() * 4));
      auto* dt = static_cast<int32_t*>(kc::malloc_device(table.size() * 4));
      auto* dnk = static_cast<int32_t*>(kc::malloc_device(nk.size() * 4));
      kc::upload(q, hq.data(), hq.size() * 4);
      kc::upload(dt, table.data(), table.size() * 4);
      kc::upload(dnk, nk.data(), nk.size() * 4);
      // T <= 64: the default launch, then the one-warp split kernel (path 3) and the decode
      // kernel with the value columns in two blocks / one (paths 4, 5) for comparison.
      // T > 64: the walk.
      for (int path : {0, 3, 4, 5}) {
      if (path != 0 && (T > 64 || hd > 128)) continue;
      kc::testing::set_attention_path_override(path);
      const Timing tm = time_per_call(
          [&](int i) {
            KvLayerView kv;
            kv.k = ks[i % layers];
            kv.v = vs[i % layers];
            kv.block_tokens = bt;
            kv.n_kv_heads = n_kv;
            kv.head_dim = hd;
            kv.dtype = kc::kKvDtype;
            kc::attention(q, T, dt, blocks, dnk, ctx, n_heads, kv,
                          static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd))), out);
          },
          T >= 1024 ? 4 : 40);
      const double t = tm.dev;
      if (T <= 64) {
        const double kv_bytes = 2.0 * ctx * n_kv * hd * 2;
        std::printf("attention ctx=%-6lld T=%-5lld dev %10.2f us  (KV %.1f MB once: %6.0f GB/s) | wall %10.2f us%s\n",
                    static_cast<long long>(ctx), static_cast<long long>(T), t * 1e6, kv_bytes / 1e6,
                    kv_bytes / t / 1e9, tm.wall * 1e6,
                    path == 3 ? "  [old split]" : path == 4 ? "  [decode, 2 parts]" : path == 5 ? "  [decode, 1 part]" : "");
      } else {
        const double flops = 4.0 * hd * n_heads * keys;
        std::printf("attention ctx=%-6lld T=%-5lld dev %10.2f us  (causal: %6.1f TFLOP/s) | wall %10.2f us\n",
                    static_cast<long long>(ctx), static_cast<long long>(T), t * 1e6,
                    flops / t / 1e12, tm.wall * 1e6);
      }
      }
      kc::testing::set_attention_path_override(0);
      kc::free_device(q);
      kc::free_device(out);
      kc::free_device(dt);
      kc::free_device(dnk);
    }
    for (int64_t l = 0; l < layers; ++l) {
      kc::free_device(ks[l]);
      kc::free_device(vs[l]);
    }
  }
}

void bench_attention() {
  bench_attention_shape(32, 8, 128, "Qwen3-8B",
                        {{512, {1}}, {2048, {1, 2048}}, {4096, {1, 8, 2048, 4096}}, {16384, {1, 8}}});
  bench_attention_shape(16, 2, 256, "head_dim 256", {{4096, {1, 4096}}});
  bench_attention_shape(16, 8, 64, "head_dim 64", {{4096, {1, 4096}}});
}

// attention-prefill: the causal prefill cases alone (the walk).
void bench_attention_prefill() {
  bench_attention_shape(32, 8, 128, "Qwen3-8B", {{2048, {2048}}, {4096, {4096}}, {512, {512}}});
  bench_attention_shape(16, 8, 64, "head_dim 64", {{4096, {4096}}});
}

// linear-prefill: the M > 64 kernels at prefill sizes, each forced in turn
// (kc::testing::set_linear_tile_override): the mma.sync tiles' own pick (-1), the wgmma kernel's
// pick (0) and its tiles (4: 128 x 128 tokens, 5: 128 x 192; 6, 7: the same, persistent), against
// cuBLAS (numerics fast).
// Random weights (never zeros); weights rotated over copies > 512 MB, as in bench_linear.
void bench_linear_prefill() {
  struct S {
    int64_t N, K;
    const char* name;
  };
  const S shapes[] = {{4096, 4096, "o_proj 4096x4096"},   {1024, 4096, "k/v 1024x4096"},
                      {6144, 4096, "qkv 6144x4096"},      {12288, 4096, "gate|up 12288x4096"},
                      {24576, 4096, "gate/up 24576x4096"}, {4096, 12288, "down 4096x12288"},
                      {151936, 4096, "lm_head 151936x4096"}};
  std::string why;
  const bool fast = kc::linear_fast_available(&why);
  if (!fast) std::printf("linear_fast (cuBLAS) unavailable: %s\n", why.c_str());
  std::printf("\n== linear-prefill: TFLOP/s (dev time, graph replay); mma.sync = tiles' pick, "
              "wgmma = default pick, wg128/wg192 forced, then on a persistent grid ==\n");
  std::vector<uint16_t> host = host_bf16(151936LL * 4096);
  std::vector<float> hx(2048LL * 12288);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = std::sin(0.001 * static_cast<double>(i));
  float* x = static_cast<float*>(kc::malloc_device(hx.size() * 4));
  kc::upload(x, hx.data(), hx.size() * 4);
  float* y = static_cast<float*>(kc::malloc_device(2048LL * 151936 * 4));
  for (const S& s : shapes) {
    const size_t bytes = static_cast<size_t>(s.N * s.K * 2);
    const int copies = static_cast<int>(std::max<size_t>(1, (512ull << 20) / bytes));
    std::vector<void*> ws(copies);
    for (auto& p : ws) {
      p = kc::malloc_device(bytes);
      kc::upload(p, host.data(), bytes);
    }
    for (int64_t M : {512, 2048}) {
      const int iters = s.N > 24576 ? 4 : 10;
      auto run = [&](int tile, bool use_fast) {
        kc::testing::set_linear_tile_override(tile);
        const Timing t = time_per_call(
            [&](int i) {
              Weight w;
              w.dtype = DType::BF16;
              w.rows = s.N;
              w.cols = s.K;
              w.data = ws[i % copies];
              if (use_fast) kc::linear_fast(x, M, w, nullptr, y);
              else kc::linear(x, M, w, nullptr, y);
            },
            iters);
        kc::testing::set_linear_tile_override(0);
        return 2.0 * M * s.N * s.K / t.dev / 1e12;
      };
      std::printf("prefill %-22s M=%-5lld mma.sync %6.1f | wgmma %6.1f | wg128 %6.1f | wg192 %6.1f | "
                  "persistent wg128 %6.1f | wg192 %6.1f",
                  s.name, static_cast<long long>(M), run(-1, false), run(0, false), run(4, false),
                  run(5, false), run(6, false), run(7, false));
      if (fast) std::printf(" | cuBLAS %6.1f", run(0, true));
      std::printf("  TFLOP/s\n");
    }
    for (auto p : ws) kc::free_device(p);
  }
  kc::free_device(x);
  kc::free_device(y);
}

void bench_rows() {
  std::printf("\n== per-row ops ==\n");
  const int64_t D = 4096;
  for (int64_t M : {1, 2048}) {
    auto* x = static_cast<float*>(kc::malloc_device(M * D * 4));
    auto* w = static_cast<float*>(kc::malloc_device(D * 4));
    auto* y = static_cast<float*>(kc::malloc_device(M * D * 4));
    kc::fill_zero(x, M * D * 4);
    kc::fill_zero(w, D * 4);
    const Timing t = time_per_call([&](int) { kc::rms_norm(x, M, D, w, 1e-6f, false, y); }, 50);
    std::printf("rms_norm M=%-5lld D=%lld dev %8.2f us | wall %8.2f us\n", static_cast<long long>(M),
                static_cast<long long>(D), t.dev * 1e6, t.wall * 1e6);
    const Timing t2 = time_per_call([&](int) { kc::silu_mul(x, x, y, M * D); }, 50);
    std::printf("silu_mul n=%-8lld dev %8.2f us | wall %8.2f us\n", static_cast<long long>(M * D),
                t2.dev * 1e6, t2.wall * 1e6);
    kc::free_device(x);
    kc::free_device(w);
    kc::free_device(y);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string why;
  if (!kc::available(&why)) {
    std::fprintf(stderr, "cuda_bench: %s\n", why.c_str());
    return 1;
  }
  std::printf("device: %s\n", kc::describe_device().c_str());
  const std::string only = argc > 1 ? argv[1] : "";
  if (only.empty() || only == "linear") bench_linear();
  if (only == "linear-sweep") bench_linear_sweep();
  if (only == "linear-prefill") bench_linear_prefill();
  if (only == "linear-batch") bench_linear_batch();
  if (only == "linear-quant") bench_linear_quant(argc > 2 ? std::atoi(argv[2]) : 0);
  if (only.empty() || only == "attention") bench_attention();
  if (only == "attention-prefill") bench_attention_prefill();
  if (only.empty() || only == "rows") bench_rows();
  return 0;
}
