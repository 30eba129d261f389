// The Gated DeltaNet per-token step at the Qwen3.5-0.8B shape (16 key and 16 value heads of 128,
// conv kernel 4): gated_delta_step() of one value head (kernels/gated_delta.h), and the whole
// per-token step of one layer (Backend::deltanet_step: conv + SiLU, l2 norms, gates, every head's
// delta rule) for one decode token and for a 512-token prompt chunk of one sequence. The layer
// step cycles over the 18 linear-attention layers' states (18 MiB), as a decode step does.
// Reports the recurrent state bytes read and written per second, and tokens/s for the layer step.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/backend.h"
#include "kernels/gated_delta.h"

namespace {
namespace k = lockstep::kernels;

constexpr int64_t kDk = 128, kDv = 128, kLayers = 18;
const k::DeltaNetShape kShape{16, 16, kDk, kDv, 4};

std::vector<float> random_floats(int64_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// One value head, one token (q scaled by dk^-1/2 and k l2-normalised, as the layer passes them).
void BM_gated_delta_step(benchmark::State& st) {
  std::vector<float> state = random_floats(kDk * kDv, 1, 0.1f), q = random_floats(kDk, 2),
                     kk = random_floats(kDk, 3), v = random_floats(kDv, 4), out(kDv);
  k::l2_normalize(q.data(), 1, kDk, 1e-6f);
  k::l2_normalize(kk.data(), 1, kDk, 1e-6f);
  for (auto& x : q) x *= 1.0f / 11.3137085f;
  for (auto _ : st) {
    k::gated_delta_step(state.data(), kDk, kDv, q.data(), kk.data(), v.data(), -0.05f, 0.5f,
                        out.data());
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["state_GBps"] = benchmark::Counter(
      2.0 * kDk * kDv * sizeof(float) * st.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// args: T (tokens of one sequence per call), threads
void BM_deltanet_layer(benchmark::State& st) {
  const int64_t T = st.range(0);
  lockstep::ThreadPool pool(static_cast<int>(st.range(1)));
  const std::unique_ptr<k::Backend> be = k::make_cpu_backend(&pool);
  const int64_t C = kShape.conv_dim();
  const std::vector<float> conv_w = random_floats(C * kShape.K, 1, 0.5f),
                           A_log = random_floats(kShape.nv, 2), dt_bias = random_floats(kShape.nv, 3),
                           inputs = random_floats(T * kShape.token_inputs(), 4);
  std::vector<std::vector<float>> conv(kLayers), delta(kLayers);
  std::vector<k::DeltaNetSpan> spans(kLayers);
  for (int64_t l = 0; l < kLayers; ++l) {
    conv[l].assign(kShape.conv_state_floats(), 0.0f);
    delta[l].assign(kShape.delta_state_floats(), 0.0f);
    spans[l] = {conv[l].data(), delta[l].data(), 0, static_cast<int32_t>(T)};
  }
  std::vector<float> core(T * kShape.value_dim());
  int64_t l = 0;
  for (auto _ : st) {
    be->deltanet_step(kShape, conv_w.data(), A_log.data(), dt_bias.data(), inputs.data(), T,
                      &spans[l++ % kLayers], 1, T, core.data());
    benchmark::DoNotOptimize(core.data());
  }
  const double state_bytes = 2.0 * kShape.delta_state_floats() * sizeof(float) * T;
  st.counters["state_GBps"] =
      benchmark::Counter(state_bytes * st.iterations() / 1e9, benchmark::Counter::kIsRate);
  st.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(T) * st.iterations(), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_gated_delta_step)->Name("gated_delta_step");
BENCHMARK(BM_deltanet_layer)->Name("deltanet_layer_decode")->ArgsProduct({{1}, {1, 2}})
    ->UseRealTime();
BENCHMARK(BM_deltanet_layer)->Name("deltanet_layer_prefill")->ArgsProduct({{512}, {1, 2}})
    ->UseRealTime()->Unit(benchmark::kMillisecond);
}  // namespace

BENCHMARK_MAIN();
