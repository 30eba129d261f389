// rms_norm() and gated_rms_norm() on rows of 1024 (Qwen3-0.6B hidden) and 2048 (Qwen3-1.7B),
// one row (decode) and 512 rows (prefill), plus gated_rms_norm at its Qwen3.5-0.8B use (16 value
// heads of 128 per token). Single-threaded: these kernels take no pool. Reports the bytes each
// call reads and writes (x, z, y; the weight once) per second.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/gated_delta.h"
#include "kernels/ops.h"

namespace {
namespace k = lockstep::kernels;

std::vector<float> random_floats(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

void set_bytes(benchmark::State& st, double bytes) {
  st.counters["GBps"] =
      benchmark::Counter(bytes * st.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// args: D (row length), M (rows)
void BM_rms_norm(benchmark::State& st) {
  const int64_t D = st.range(0), M = st.range(1);
  const std::vector<float> x = random_floats(M * D, 1), w = random_floats(D, 2);
  std::vector<float> y(M * D);
  for (auto _ : st) {
    k::rms_norm(x.data(), M, D, w.data(), 1e-6f, false, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(st, (2.0 * M * D + D) * sizeof(float));
}

void BM_gated_rms_norm(benchmark::State& st) {
  const int64_t D = st.range(0), M = st.range(1);
  const std::vector<float> x = random_floats(M * D, 1), z = random_floats(M * D, 3),
                           w = random_floats(D, 2);
  std::vector<float> y(M * D);
  for (auto _ : st) {
    k::gated_rms_norm(x.data(), z.data(), M, D, w.data(), 1e-6f, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(st, (3.0 * M * D + D) * sizeof(float));
}

BENCHMARK(BM_rms_norm)->Name("rms_norm")->ArgsProduct({{1024, 2048}, {1, 512}});
BENCHMARK(BM_gated_rms_norm)->Name("gated_rms_norm")
    ->ArgsProduct({{1024, 2048}, {1, 512}})->Args({128, 16})->Args({128, 16 * 512});
}  // namespace

BENCHMARK_MAIN();
