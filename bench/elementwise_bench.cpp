// The element-wise kernels at Qwen3-0.6B shapes, one row (decode) and 512 rows (prefill):
// silu_mul() over the MLP's 3072 intermediate values, the residual add (Backend::add; ops.h has
// no free add) over the 1024 hidden values, and rope() over 16 query heads of 128 (rotary_dim
// 128, theta 1e6, positions 0..M-1). Single-threaded: these kernels take no pool. Reports the
// bytes each call reads and writes per second.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "kernels/rope_table.h"

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

// args: M (rows); n = M * 3072
void BM_silu_mul(benchmark::State& st) {
  const int64_t n = st.range(0) * 3072;
  const std::vector<float> gate = random_floats(n, 1), up = random_floats(n, 2);
  std::vector<float> out(n);
  for (auto _ : st) {
    k::silu_mul(gate.data(), up.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(st, 3.0 * n * sizeof(float));
}

// args: M (rows); n = M * 1024. x grows a little each iteration; values stay finite.
void BM_add(benchmark::State& st) {
  const int64_t n = st.range(0) * 1024;
  lockstep::ThreadPool pool(1);
  const std::unique_ptr<k::Backend> be = k::make_cpu_backend(&pool);
  std::vector<float> x = random_floats(n, 1);
  const std::vector<float> delta = random_floats(n, 2);
  for (auto _ : st) {
    be->add(x.data(), delta.data(), n);
    benchmark::DoNotOptimize(x.data());
  }
  set_bytes(st, 3.0 * n * sizeof(float));
}

// args: M (rows) of 16 heads x 128, rotated in place (repeated rotations keep the norm).
void BM_rope(benchmark::State& st) {
  const int64_t M = st.range(0), heads = 16, head_dim = 128;
  std::vector<float> inv_freq(head_dim / 2);
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = static_cast<float>(std::pow(1e6, -2.0 * i / head_dim));
  const k::RopeTable table(inv_freq, 1.0f);
  std::vector<int64_t> pos(M);
  for (int64_t m = 0; m < M; ++m) pos[m] = m;
  std::vector<float> cos_sin(M * head_dim);
  table.fill(pos.data(), M, cos_sin.data());
  std::vector<float> x = random_floats(M * heads * head_dim, 1);
  for (auto _ : st) {
    k::rope(x.data(), M, heads, head_dim, head_dim, cos_sin.data());
    benchmark::DoNotOptimize(x.data());
  }
  set_bytes(st, (2.0 * M * heads * head_dim + M * head_dim) * sizeof(float));
}

BENCHMARK(BM_silu_mul)->Name("silu_mul")->Arg(1)->Arg(512);
BENCHMARK(BM_add)->Name("add")->Arg(1)->Arg(512);
BENCHMARK(BM_rope)->Name("rope")->Arg(1)->Arg(512);
}  // namespace

BENCHMARK_MAIN();
