// linear() with Affine-quantized weights (4 and 8 bits, group 64, BF16 scales and biases, made by
// quantize_affine from random BF16 weights) at Qwen3-1.7B shapes: attention's q/o (2048x2048) and
// the MLP's gate/up (6144x2048). One row (decode, GEMV) and 512 rows (prefill, GEMM). Reports
// bytes/s of weight read (codes + scales + biases) and FLOP/s. As in linear_bench, decode cycles
// over enough copies of the weight (>= 64 MiB) that calls stream mostly from DRAM. The same in
// the CPU backend's panel layout (gemv_quant_panels, >= 1 GiB of copies), beside a plain sum of
// those bytes (panels_plain_sum): how close decode's kernel comes to the stream it reads.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/cpu/quant_panels.h"
#include "kernels/quant_format.h"

namespace {
using lockstep::DType;
using lockstep::ThreadPool;
namespace k = lockstep::kernels;

// One quantized matrix per (N, K, bits), made once per process (quantize_affine is scalar).
const k::QuantizedMatrix& quantized(int64_t N, int64_t K, int bits) {
  static std::map<std::tuple<int64_t, int64_t, int>, k::QuantizedMatrix> cache;
  auto it = cache.find({N, K, bits});
  if (it != cache.end()) return it->second;
  std::mt19937 rng(1);
  std::vector<uint16_t> w(N * K);
  for (auto& v : w) v = static_cast<uint16_t>(0x3c00 + (rng() & 0x3ff));  // bf16 in [2^-7, 2^-6)
  ThreadPool pool(2);
  const k::Weight src{DType::BF16, N, K, w.data()};
  return cache[{N, K, bits}] = k::quantize_affine(src, bits, 64, DType::BF16, pool);
}

// args: N, K, M, threads, bits
void BM_linear_quant(benchmark::State& st) {
  const int64_t N = st.range(0), K = st.range(1), M = st.range(2);
  ThreadPool pool(static_cast<int>(st.range(3)));
  const k::QuantizedMatrix& base = quantized(N, K, static_cast<int>(st.range(4)));
  const int64_t bytes = base.view().bytes();
  const int64_t copies = M == 1 ? (int64_t{64} << 20) / bytes + 1 : 1;
  const std::vector<k::QuantizedMatrix> cs(copies, base);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(M * K), y(M * N);
  for (auto& v : x) v = u(rng);
  int64_t i = 0;
  for (auto _ : st) {
    k::linear(x.data(), M, cs[i++ % copies].view(), nullptr, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["weight_GBps"] = benchmark::Counter(
      static_cast<double>(bytes) * st.iterations() / 1e9, benchmark::Counter::kIsRate);
  st.counters["GFLOPs"] = benchmark::Counter(2.0 * M * N * K * st.iterations() / 1e9,
                                             benchmark::Counter::kIsRate);
}

// One row on the CPU's load-time panels (kernels/cpu/quant_panels.h), the layout decode reads:
// copies of the packed weight totalling >= 1 GiB, past any last-level cache, cycled through.
// args: N, K, threads, bits. "panels_plain_sum" reads the same copies with a plain sum (one
// thread, 8 independent accumulators): the ceiling of that stream on this machine.
void run_panels(benchmark::State& st, bool plain) {
  const int64_t N = st.range(0), K = st.range(1);
  ThreadPool pool(static_cast<int>(st.range(2)));
  const k::QuantizedMatrix& base = quantized(N, K, static_cast<int>(st.range(3)));
  const k::Weight src = base.view();
  const k::PanelShape shape = k::panel_shape(src);
  const int64_t copies = (int64_t{1} << 30) / shape.bytes() + 1;
  k::PanelArena arena;  // freed after the run
  std::vector<k::Weight> ws(copies, src);
  for (int64_t c = 0; c < copies; ++c) {  // packed once, copied
    uint8_t* out = arena.allocate(static_cast<size_t>(shape.bytes()));
    if (c == 0)
      k::pack_panels(src, 0, shape.panels, out);
    else
      std::memcpy(out, ws[0].panels, static_cast<size_t>(shape.bytes()));
    ws[c].panels = out;
  }
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(K), y(N);
  for (auto& v : x) v = u(rng);
  int64_t i = 0;
  for (auto _ : st) {
    const k::Weight& w = ws[i++ % copies];
    if (plain) {
      const auto* p = static_cast<const uint64_t*>(w.panels);
      uint64_t a[8] = {};
      for (int64_t q = 0; q + 8 <= shape.bytes() / 8; q += 8)
        for (int l = 0; l < 8; ++l) a[l] += p[q + l];
      y[0] = static_cast<float>(a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7]);
    } else {
      k::linear(x.data(), 1, w, nullptr, y.data(), pool);
    }
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["weight_GBps"] = benchmark::Counter(
      static_cast<double>(plain ? shape.bytes() : src.bytes()) * st.iterations() / 1e9,
      benchmark::Counter::kIsRate);
}
void BM_gemv_quant_panels(benchmark::State& st) { run_panels(st, false); }
void BM_panels_plain_sum(benchmark::State& st) { run_panels(st, true); }

BENCHMARK(BM_gemv_quant_panels)->Name("gemv_quant_panels")
    ->ArgsProduct({{1024, 2048, 6144}, {2048}, {1, 2}, {4, 8}})->UseRealTime();
BENCHMARK(BM_gemv_quant_panels)->Name("gemv_quant_panels")
    ->ArgsProduct({{2048}, {6144}, {1, 2}, {4}})->UseRealTime();
BENCHMARK(BM_panels_plain_sum)->Name("panels_plain_sum")
    ->ArgsProduct({{6144}, {2048}, {1}, {4}})->UseRealTime();
BENCHMARK(BM_linear_quant)->Name("gemv_quant")
    ->ArgsProduct({{2048, 6144}, {2048}, {1}, {1, 2}, {4, 8}})->UseRealTime();
BENCHMARK(BM_linear_quant)->Name("gemm_quant")
    ->ArgsProduct({{2048, 6144}, {2048}, {512}, {1, 2}, {4, 8}})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
}  // namespace

BENCHMARK_MAIN();
