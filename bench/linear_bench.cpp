// linear() at Qwen3-0.6B shapes: one row (decode, GEMV) and 512 rows (prefill, GEMM), BF16 and
// F32 weights. Reports bytes/s of weight read (decode is bandwidth-bound) and FLOP/s.
// Weights are larger than the last-level cache in the GEMV case, as in a real decode step.
// LINEAR_BENCH_TARGET=AVX2 (a Highway target name) runs the kernels compiled for that target.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "hwy/targets.h"
#include "kernels/ops.h"

namespace {
using lockstep::DType;
using lockstep::ThreadPool;
namespace k = lockstep::kernels;

struct Case {
  std::vector<uint16_t> w16;
  std::vector<float> w32, x, y;
};

// args: N, K, M, threads, dtype (0 = BF16, 1 = F32), copies (weight sets cycled, to defeat caches)
void BM_linear(benchmark::State& st) {
  const int64_t N = st.range(0), K = st.range(1), M = st.range(2);
  const int threads = static_cast<int>(st.range(3));
  const bool f32 = st.range(4) == 1;
  const int copies = static_cast<int>(st.range(5));
  ThreadPool pool(threads);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<Case> cs(copies);
  for (Case& c : cs) {
    if (f32) {
      c.w32.resize(N * K);
      for (auto& v : c.w32) v = u(rng);
    } else {
      c.w16.resize(N * K);
      for (auto& v : c.w16) v = static_cast<uint16_t>(0x3c00 + (rng() & 0x3ff));
    }
  }
  std::vector<float> x(M * K), y(M * N);
  for (auto& v : x) v = u(rng);
  int i = 0;
  for (auto _ : st) {
    const Case& c = cs[i++ % copies];
    k::Weight w{f32 ? DType::F32 : DType::BF16, N, K,
                f32 ? static_cast<const void*>(c.w32.data()) : c.w16.data()};
    k::linear(x.data(), M, w, nullptr, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes = static_cast<double>(N) * K * (f32 ? 4 : 2);
  st.counters["weight_GBps"] =
      benchmark::Counter(bytes * st.iterations() / 1e9, benchmark::Counter::kIsRate);
  st.counters["GFLOPs"] = benchmark::Counter(2.0 * M * N * K * st.iterations() / 1e9,
                                             benchmark::Counter::kIsRate);
}

// Decode: the MLP's gate/up (3072x1024) and down (1024x3072), attention's o (1024x2048), 2 and
// 1 threads, 16 weight copies (64-96 MiB) so calls stream mostly from DRAM (the 32 MB L3 of the
// development VM still holds a part between uses); the lm_head (151936x1024, 311 MB, one copy)
// streams only from DRAM.
BENCHMARK(BM_linear)->Name("gemv_bf16")
    ->Args({3072, 1024, 1, 2, 0, 16})->Args({1024, 3072, 1, 2, 0, 16})
    ->Args({1024, 2048, 1, 2, 0, 16})->Args({151936, 1024, 1, 2, 0, 1})
    ->Args({3072, 1024, 1, 1, 0, 16})->Args({1024, 3072, 1, 1, 0, 16})->UseRealTime();
BENCHMARK(BM_linear)->Name("gemv_f32")->Args({3072, 1024, 1, 2, 1, 8})->UseRealTime();
// Prefill: 512 rows, weights in cache-sized pieces are reused across rows.
BENCHMARK(BM_linear)->Name("gemm_bf16")
    ->Args({3072, 1024, 512, 2, 0, 1})->Args({3072, 1024, 512, 1, 0, 1})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
}  // namespace

int main(int argc, char** argv) {
  if (const char* want = std::getenv("LINEAR_BENCH_TARGET")) {
    bool found = false;
    for (int64_t target : hwy::SupportedAndGeneratedTargets())
      if (std::strcmp(hwy::TargetName(target), want) == 0) {
        hwy::SetSupportedTargetsForTest(target);
        found = true;
      }
    if (!found) {
      std::fprintf(stderr, "LINEAR_BENCH_TARGET=%s: not a compiled target this CPU supports\n",
                   want);
      return 1;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
