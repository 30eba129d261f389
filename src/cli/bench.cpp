// lockstep bench: prefill and decode speed against this machine's measured peaks.
//   lockstep bench --machine [--threads N]     measure read bandwidth and FMA peak, cache them
//   lockstep bench -m DIR [-p 512] [-n 128] [--threads N] [--numerics exact|fast] [--spec ...]
//   lockstep bench -m DIR --batch N [-p 512] [-n 128]   the engine's batched decode step
// The machine figures are cached per thread count in ~/.cache/lockstep/machine.json (measured on
// first use when absent, or when cached by another CPU or measurement method). Every figure is a median over repetitions, with its spread.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/constraint_flags.h"
#include "cli/spec_flags.h"
#include "core/dtype.h"
#include "core/error.h"
#include "decode/bench.h"
#include "kernels/numerics.h"
#include "kernels/peak.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {
namespace {
using nlohmann::json;
namespace fs = std::filesystem;

struct BenchFlags {
  ModelFlags model;
  SpecFlags spec;
  ConstraintFlags constraint;
  BenchOptions bench;
  int64_t batch = 0;  // --batch: sequences per decode step (0: the single-sequence bench)
  bool machine = false, json_out = false;
};

fs::path cache_path() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "lockstep" / "machine.json";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/tmp") / ".cache" / "lockstep" / "machine.json";
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

json summary_json(const Summary& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"spread", s.spread()}};
}

// The GPU's figures for --device cuda: copy bandwidth measured here through the CUDA backend
// (bytes read plus bytes written over time, the ceiling a weight-streaming decode can approach)
// and the BF16 tensor-core peak from $LOCKSTEP_GPU_PEAK_TFLOPS (tools/cuda measures it with
// cuBLAS through PyTorch on the GPU machine; NaN when unset, and fractions print as nan).
json measure_gpu() {
  auto be = kernels::make_cuda_backend();
  const size_t bytes = size_t{1} << 31;
  void* a = be->allocate(bytes);
  void* b = be->allocate(bytes);
  float probe = 0;
  std::vector<double> gbps;
  for (int rep = 0; rep < 6; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 4; ++i) be->copy(i % 2 ? a : b, i % 2 ? b : a, bytes);
    be->download(&probe, a, sizeof(float));  // waits for the copies
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) gbps.push_back(4.0 * 2.0 * static_cast<double>(bytes) / s / 1e9);
  }
  be->release(a);
  be->release(b);
  const Summary bw = summarize(gbps);
  double peak = std::numeric_limits<double>::quiet_NaN();
  if (const char* env = std::getenv("LOCKSTEP_GPU_PEAK_TFLOPS"); env && *env) peak = std::atof(env);
  return {{"cpu", be->describe()}, {"threads", 0}, {"read_gbps", summary_json(bw)},
          {"fma_gflops", {{"median", peak * 1000}, {"spread", 0.0}}}};
}

// Measures the peaks for the global pool's thread count and stores them in the cache.
json measure_machine(int threads) {
  ThreadPool& pool = ThreadPool::global();
  std::fprintf(stderr, "lockstep: measuring read bandwidth and FMA peak with %d threads...\n",
               pool.size());
  // The faster of the two streams (kernels/peak.h): the floor is the best read the machine gave.
  const kernels::ReadSeries reads = kernels::measure_read_gbps(pool, size_t{1} << 30, 7);
  const Summary with = summarize(reads.gemv_prefetch), without = summarize(reads.no_prefetch);
  const Summary bw = without.median > with.median ? without : with;
  const Summary fma = summarize(kernels::measure_fma_gflops(pool, 7));
  json m = {{"cpu", cpu_name()}, {"threads", pool.size()}, {"method", kernels::kPeakMethod},
            {"read_gbps", summary_json(bw)}, {"fma_gflops", summary_json(fma)}};
  json all;
  const fs::path p = cache_path();
  if (std::ifstream in(p); in) all = json::parse(in, nullptr, false);
  if (!all.is_object()) all = json::object();
  all[std::to_string(threads)] = m;
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  if (std::ofstream out(p); out) out << all.dump(2) << "\n";
  return m;
}

json machine_for(int threads) {
  const fs::path p = cache_path();
  if (std::ifstream in(p); in) {
    json all = json::parse(in, nullptr, false);
    const std::string key = std::to_string(threads);
    if (all.is_object() && all.contains(key) && all[key].value("cpu", "") == cpu_name() &&
        all[key].value("method", 1) == kernels::kPeakMethod)
      return all[key];
  }
  return measure_machine(threads);
}

double peak_rss_mib() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;  // Linux reports KiB
}

void print_machine(const json& m) {
  if (m["threads"].get<int>() == 0) {  // a GPU (measure_gpu)
    std::printf("machine: %s: copy %.1f GB/s (spread %.0f%%), BF16 tensor peak %.1f TFLOP/s "
                "($LOCKSTEP_GPU_PEAK_TFLOPS)\n",
                m["cpu"].get<std::string>().c_str(), m["read_gbps"]["median"].get<double>(),
                100 * m["read_gbps"]["spread"].get<double>(),
                m["fma_gflops"]["median"].get<double>() / 1000);
    return;
  }
  std::printf("machine: %s, %d threads: read %.1f GB/s (spread %.0f%%), FMA %.1f GFLOP/s (spread %.0f%%)\n",
              m["cpu"].get<std::string>().c_str(), m["threads"].get<int>(),
              m["read_gbps"]["median"].get<double>(), 100 * m["read_gbps"]["spread"].get<double>(),
              m["fma_gflops"]["median"].get<double>(), 100 * m["fma_gflops"]["spread"].get<double>());
}

// --batch N: step time of N sequences decoding together (run_batch_bench), against the floor of
// the bytes one such step reads (weights once, N sequences' KV and state).
int run_batch_command(const BenchFlags& f, const json& machine, const std::string& dir, Model& model,
                      const Workload& w) {
  BatchBenchOptions o;
  o.batch = f.batch;
  o.prompt_tokens = f.bench.prompt_tokens;
  o.gen_tokens = f.bench.gen_tokens;
  o.repetitions = f.bench.repetitions;
  o.seed = f.bench.seed;
  const std::vector<BatchBenchRun> runs = run_batch_bench(model, o);
  std::vector<double> steps, prefill;
  for (const BatchBenchRun& r : runs) {
    steps.insert(steps.end(), r.step_seconds.begin(), r.step_seconds.end());
    prefill.push_back(r.prefill_seconds);
  }
  double mean_step = 0;
  for (double s : steps) mean_step += s / static_cast<double>(steps.size());
  const Summary step = summarize(steps);
  const double n = static_cast<double>(f.batch), p = static_cast<double>(o.prompt_tokens);
  const double mean_ctx = p + (o.gen_tokens + 1) / 2.0;
  const double bytes = w.batch_decode_bytes(mean_ctx, n), flops = n * w.token_flops(mean_ctx);
  const double bw = machine["read_gbps"]["median"];
  const double agg_tps = n / mean_step, gbps = bytes / mean_step / 1e9;
  const double floor_tps = n * bw * 1e9 / bytes;
  const double prefill_tps = n * p / summarize(prefill).median;
  json j = {
      {"model", dir},
      {"threads", ThreadPool::global().size()},
      {"device", f.model.device},
      {"numerics", f.spec.numerics},
      {"quant_dot", kernels::quant_dot_name(kernels::quant_dot())},
      {"batch", f.batch},
      {"prompt_tokens", o.prompt_tokens},
      {"gen_tokens", o.gen_tokens},
      {"repetitions", o.repetitions},
      {"machine", machine},
      {"workload", {{"decode_bytes_per_step", bytes}, {"decode_flops_per_step", flops}}},
      {"prefill", {{"tok_s", prefill_tps}, {"seconds_median", summarize(prefill).median}}},
      {"decode_step_ms", {{"median", 1e3 * step.median}, {"mean", 1e3 * mean_step},
                          {"min", 1e3 * step.min}, {"max", 1e3 * step.max}}},
      {"decode", {{"steps", steps.size()},
                  {"aggregate_tok_s", agg_tps},
                  {"per_sequence_tok_s", 1 / mean_step},
                  {"gbps", gbps},
                  {"gflops", flops / mean_step / 1e9},
                  {"floor_tok_s", floor_tps},
                  {"fraction_of_bandwidth_floor", gbps / bw}}},
      {"peak_rss_mib", peak_rss_mib()},
  };
  // A mixture of experts: the share of its routed experts' bytes counted above.
  if (w.routed_bytes > 0) j["workload"]["routed_expert_share"] = w.batch_routed_share(n);
  if (f.json_out) {
    std::cout << j.dump() << "\n";
    return 0;
  }
  print_machine(machine);
  std::printf("model: %s (%s, %s numerics, %d threads), batch %lld, prompt %lld, %lld steps x %d repetitions\n",
              dir.c_str(), f.model.device.c_str(), f.spec.numerics.c_str(), ThreadPool::global().size(),
              static_cast<long long>(f.batch), static_cast<long long>(o.prompt_tokens),
              static_cast<long long>(o.gen_tokens), o.repetitions);
  std::printf("prefill    %12.2f tok/s (%lld sequences, each prefilled alone)\n", prefill_tps,
              static_cast<long long>(f.batch));
  std::printf("decode step  median %.3f ms, mean %.3f ms (min %.3f, max %.3f)\n", 1e3 * step.median,
              1e3 * mean_step, 1e3 * step.min, 1e3 * step.max);
  std::printf("decode     %12.2f tok/s aggregate, %.2f per sequence: %.1f GB/s, %.1f%% of the bandwidth floor "
              "(floor %.1f tok/s, %.0f MB/step)\n",
              agg_tps, 1 / mean_step, gbps, 100 * gbps / bw, floor_tps, bytes / 1e6);
  if (w.routed_bytes > 0)
    std::printf("           (routed experts counted at %.1f%% of their bytes: the distinct experts %lld "
                "tokens read if routing were uniform; one token reads %.1f%%)\n",
                100 * w.batch_routed_share(n), static_cast<long long>(f.batch),
                100 * w.routed_share);
  std::printf("peak RSS: %.0f MiB\n", peak_rss_mib());
  return 0;
}

int run_bench_command(BenchFlags& f) {
  ThreadPool::set_default_threads(f.model.threads);
  const int threads = ThreadPool::global().size();
  if (f.machine) {
    const json m = measure_machine(threads);
    if (f.json_out) std::cout << m.dump() << "\n";
    else print_machine(m);
    std::fprintf(stderr, "lockstep: cached in %s\n", cache_path().c_str());
    return 0;
  }
  if (f.batch > 0 && f.spec.spec != "none")
    fail("--batch: decode steps are classic (one token per sequence); drop --spec");
  if (f.batch > 0 && f.constraint.given())
    fail("--batch: constrained decoding is not benchmarked batched; drop the constraint flags");
  const bool gpu = kernels::parse_device(f.model.device) == kernels::Device::Cuda;
  const json machine = gpu ? measure_gpu() : machine_for(threads);
  const std::string dir = resolve_model_dir(f.model);
  ModelFlags mf = f.model;
  mf.dir = dir;
  const int64_t sequences = std::max<int64_t>(f.batch, 1);
  auto model = load_model_from_flags(mf, sequences * (f.bench.prompt_tokens + f.bench.gen_tokens + 16));
  apply_numerics(f.spec);
  if (f.batch > 0) {
    const Workload w = workload_of(dir, model->config(), static_cast<int64_t>(dtype_size(model->kv_pool().dtype())),
                                   f.model.quantize, f.model.quantize_group_size);
    return run_batch_command(f, machine, dir, *model, w);
  }
  DraftHolder draft_model;
  auto drafter = make_drafter(f.spec, dir, *model, SamplingParams{}, draft_model);
  f.bench.drafter = drafter.get();
  f.bench.draft_width =
      f.spec.draft_width > 0 ? f.spec.draft_width : default_draft_width(f.spec.spec);
  // The bench ignores EOS, and so does its constraint: a run stops early only where the grammar
  // has ended.
  if (f.constraint.given()) {
    auto tok = load_tokenizer_if_present(dir);
    f.bench.constraint =
        compile_constraint_flags(f.constraint, tok.get(), model->config(), {}, false);
  }
  const Workload w = workload_of(dir, model->config(),
                                 static_cast<int64_t>(dtype_size(model->kv_pool().dtype())),
                                 f.model.quantize, f.model.quantize_group_size);
  const std::vector<BenchRun> runs = run_bench(*model, f.bench);

  const double p = static_cast<double>(f.bench.prompt_tokens);
  // Prefill: position i attends to i + 1 keys; decode step j (1-based) to p + j keys.
  const double prefill_flops = w.prefill_flops(p);
  const double mean_ctx = p + (f.bench.gen_tokens + 1) / 2.0;
  const double decode_bytes = w.decode_bytes(mean_ctx), decode_flops = w.token_flops(mean_ctx);
  std::vector<double> pre_tps, dec_tps, decoded;
  for (const BenchRun& r : runs) {
    pre_tps.push_back(p / r.prefill_seconds);
    dec_tps.push_back(r.decoded / r.decode_seconds);
    decoded.push_back(static_cast<double>(r.decoded));
  }
  const double decoded_median = summarize(decoded).median;
  const Summary pre = summarize(pre_tps), dec = summarize(dec_tps);
  const double bw = machine["read_gbps"]["median"], fma = machine["fma_gflops"]["median"];
  const double pre_gflops = pre.median * prefill_flops / p / 1e9;
  const double dec_gbps = dec.median * decode_bytes / 1e9;
  const double floor_tps = bw * 1e9 / decode_bytes;
  json j = {
      {"model", dir},
      {"threads", threads},
      {"device", f.model.device},
      {"numerics", f.spec.numerics},
      {"quant_dot", kernels::quant_dot_name(kernels::quant_dot())},
      {"spec", f.spec.spec},
      {"prompt_tokens", f.bench.prompt_tokens},
      {"gen_tokens", f.bench.gen_tokens},
      {"repetitions", f.bench.repetitions},
      {"machine", machine},
      {"workload", {{"decode_bytes_per_token", decode_bytes},
                    {"decode_flops_per_token", decode_flops},
                    {"prefill_flops", prefill_flops}}},
      {"prefill", {{"tok_s", summary_json(pre)},
                   {"gflops", pre_gflops},
                   {"fraction_of_fma_peak", pre_gflops / fma}}},
      {"constrained", f.bench.constraint != nullptr},
      {"decode", {{"tok_s", summary_json(dec)},
                  {"decoded_tokens_median", decoded_median},
                  {"gbps", dec_gbps},
                  {"gflops", dec.median * decode_flops / 1e9},
                  {"floor_tok_s", floor_tps},
                  {"fraction_of_bandwidth_floor", dec_gbps / bw}}},
      {"peak_rss_mib", peak_rss_mib()},
  };
  if (f.json_out) {
    std::cout << j.dump() << "\n";
    return 0;
  }
  print_machine(machine);
  std::printf("model: %s (%s, %s numerics, %s quant dot, spec %s, %d threads, %d repetitions%s)\n",
              dir.c_str(), f.model.device.c_str(), f.spec.numerics.c_str(),
              kernels::quant_dot_name(kernels::quant_dot()), f.spec.spec.c_str(), threads,
              f.bench.repetitions, f.bench.constraint ? ", constrained" : "");
  std::printf("%-9s %8s %12s %8s %12s %10s\n", "", "tokens", "tok/s", "spread", "achieved",
              "of peak");
  std::printf("%-9s %8lld %12.2f %7.1f%% %7.1f GF/s %9.1f%%\n", "prefill",
              static_cast<long long>(f.bench.prompt_tokens), pre.median, 100 * pre.spread(),
              pre_gflops, 100 * pre_gflops / fma);
  std::printf("%-9s %8lld %12.2f %7.1f%% %7.1f GB/s %9.1f%%  (floor %.1f tok/s, %.0f MB/token)\n",
              "decode", static_cast<long long>(decoded_median), dec.median,
              100 * dec.spread(), dec_gbps, 100 * dec_gbps / bw, floor_tps, decode_bytes / 1e6);
  std::printf("peak RSS: %.0f MiB\n", peak_rss_mib());
  return 0;
}

const Command kBench("bench", "Measure prefill and decode speed against this machine's peaks",
                     [](CLI::App& sub) {
                       auto f = std::make_shared<BenchFlags>();
                       add_model_flags(sub, f->model, false);
                       add_spec_flags(sub, f->spec);
                       add_constraint_flags(sub, f->constraint);
                       sub.add_flag("--machine", f->machine,
                                    "Measure read bandwidth and FMA throughput, and cache them");
                       sub.add_option("-p,--prompt", f->bench.prompt_tokens,
                                      "Prompt tokens prefilled in one forward (default 512)");
                       sub.add_option("-n,--gen", f->bench.gen_tokens,
                                      "Tokens decoded (default 128)");
                       sub.add_option("-r,--repetitions", f->bench.repetitions,
                                      "Timed repetitions after one warm-up (default 3)");
                       sub.add_option("--batch", f->batch,
                                      "Sequences decoding together: prefill each with -p tokens, then -n steps of "
                                      "one forward over all of them, as the serving engine steps (step time, "
                                      "aggregate tok/s, bandwidth floor)")
                           ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
                       sub.add_flag("--json", f->json_out, "One JSON object on stdout");
                       return [f] { return run_bench_command(*f); };
                     });

}  // namespace
}  // namespace lockstep::cli
