// Microbenchmarks of the CUDA kernels (cuda_ops.h) on Qwen3-8B shapes. Weights and KV caches are
// rotated over several copies (> 2x the 60 MB L2) so every timed call reads from HBM. Two times
// per case, after warm-up: "dev" = the calls captured once into a CUDA graph and replayed, timed
// with events (device time, launch gaps of a graph only); "wall" = host clock over a batch of
// plainly enqueued calls (includes the host's launch cost, about 3 us a kernel on that machine).
//   cuda_bench            all benchmarks
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

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

// Attention over a paged FP32 cache of `ctx` positions (block 16): T = 1 and 8 are decode and
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
    std::vector<float> hk(kv_floats);
    for (size_t i = 0; i < kv_floats; ++i) hk[i] = std::cos(0.37 * static_cast<double>(i % 10007));
    std::vector<float*> ks(layers), vs(layers);
    for (int64_t l = 0; l < layers; ++l) {
      ks[l] = static_cast<float*>(kc::malloc_device(kv_floats * 4));
      vs[l] = static_cast<float*>(kc::malloc_device(kv_floats * 4));
      kc::upload(ks[l], hk.data(), kv_floats * 4);
      kc::upload(vs[l], hk.data(), kv_floats * 4);
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
      const Timing tm = time_per_call(
          [&](int i) {
            KvLayerView kv;
            kv.k = ks[i % layers];
            kv.v = vs[i % layers];
            kv.block_tokens = bt;
            kv.n_kv_heads = n_kv;
            kv.head_dim = hd;
            kc::attention(q, T, dt, blocks, dnk, ctx, n_heads, kv,
                          static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd))), out);
          },
          T >= 1024 ? 4 : 40);
      const double t = tm.dev;
      if (T <= 64) {
        const double kv_bytes = 2.0 * ctx * n_kv * hd * 4;
        std::printf("attention ctx=%-6lld T=%-5lld dev %10.2f us  (KV %.1f MB once: %6.0f GB/s) | wall %10.2f us\n",
                    static_cast<long long>(ctx), static_cast<long long>(T), t * 1e6, kv_bytes / 1e6,
                    kv_bytes / t / 1e9, tm.wall * 1e6);
      } else {
        const double flops = 4.0 * hd * n_heads * keys;
        std::printf("attention ctx=%-6lld T=%-5lld dev %10.2f us  (causal: %6.1f TFLOP/s) | wall %10.2f us\n",
                    static_cast<long long>(ctx), static_cast<long long>(T), t * 1e6,
                    flops / t / 1e12, tm.wall * 1e6);
      }
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
                        {{512, {1}}, {2048, {1, 2048}}, {4096, {1, 8, 2048, 4096}}, {16384, {1}}});
  bench_attention_shape(16, 2, 256, "head_dim 256", {{4096, {1, 4096}}});
  bench_attention_shape(16, 8, 64, "head_dim 64", {{4096, {1, 4096}}});
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
  if (only.empty() || only == "attention") bench_attention();
  if (only.empty() || only == "rows") bench_rows();
  return 0;
}
