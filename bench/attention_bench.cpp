// attention() over a paged KV cache at the Qwen3-0.6B shape (16 query heads, 8 KV heads,
// head_dim 128, 16-token blocks). Decode: one query row over 512, 2048 and 4096 keys; prefill:
// 512 rows of one sequence from position 0 (row t sees t + 1 keys). The sequence's blocks are a
// shuffled subset of a larger pool, as after other sequences came and went. Reports the KV bytes
// each query row reads (summed over rows) per second and FLOP/s (q.k and p.v: 4 * head_dim per
// head and key).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace {
using lockstep::ThreadPool;
namespace k = lockstep::kernels;

constexpr int64_t kHeads = 16, kKvHeads = 8, kHeadDim = 128, kBlock = 16;

// args: T (query rows), keys of the last row, threads
void BM_attention(benchmark::State& st) {
  const int64_t T = st.range(0), n_keys = st.range(1);
  ThreadPool pool(static_cast<int>(st.range(2)));
  const int64_t seq_blocks = (n_keys + kBlock - 1) / kBlock, pool_blocks = 2 * seq_blocks;
  const int64_t block_floats = kBlock * kKvHeads * kHeadDim;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> kc(pool_blocks * block_floats), vc(kc.size());
  for (auto& x : kc) x = u(rng);
  for (auto& x : vc) x = u(rng);
  std::vector<int32_t> all(pool_blocks);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  const std::vector<int32_t> table(all.begin(), all.begin() + seq_blocks);

  std::vector<k::AttentionRow> rows(T);
  double kv_bytes = 0, flops = 0;
  for (int64_t t = 0; t < T; ++t) {
    rows[t] = {table.data(), n_keys - T + 1 + t};
    kv_bytes += 2.0 * rows[t].n_keys * kKvHeads * kHeadDim * sizeof(float);
    flops += 4.0 * rows[t].n_keys * kHeads * kHeadDim;
  }
  std::vector<float> q(T * kHeads * kHeadDim), out(q.size());
  for (auto& x : q) x = u(rng);
  const k::KvLayerView kv{kc.data(), vc.data(), kBlock, kKvHeads, kHeadDim};
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  for (auto _ : st) {
    k::attention(q.data(), T, rows, kHeads, kv, scale, out.data(), pool);
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["kv_GBps"] =
      benchmark::Counter(kv_bytes * st.iterations() / 1e9, benchmark::Counter::kIsRate);
  st.counters["GFLOPs"] =
      benchmark::Counter(flops * st.iterations() / 1e9, benchmark::Counter::kIsRate);
}

BENCHMARK(BM_attention)->Name("attention_decode")
    ->ArgsProduct({{1}, {512, 2048, 4096}, {1, 2}})->UseRealTime();
BENCHMARK(BM_attention)->Name("attention_prefill")
    ->ArgsProduct({{512}, {512}, {1, 2}})->UseRealTime()->Unit(benchmark::kMillisecond);
}  // namespace

BENCHMARK_MAIN();
