#include "client/serve_bench_report.h"

#include <cstdarg>
#include <cstdio>

namespace lockstep::client {

namespace {

using json = nlohmann::ordered_json;

__attribute__((format(printf, 1, 2))) std::string format(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

json ms_json(const Distribution& d) {
  return {{"mean", 1000 * d.mean}, {"p50", 1000 * d.p50}, {"p90", 1000 * d.p90},
          {"p99", 1000 * d.p99}, {"max", 1000 * d.max}};
}

double per_second(double count, double seconds) { return seconds > 0 ? count / seconds : 0; }

json steps_json(const StepBreakdown& b, const LevelResult& L) {
  json ms = json::object();
  for (const auto& [phase, seconds] : b.phase_seconds) ms[phase] = b.ms_per_step(seconds);
  ms["total"] = b.ms_per_step(b.busy_seconds());
  const double tokens = static_cast<double>(L.completion_tokens);
  return {{"steps", b.steps},
          {"rows_per_step", b.steps > 0 ? b.rows / b.steps : 0},
          {"sequences_per_step", b.steps > 0 ? b.sequences / b.steps : 0},
          {"ms_per_step", ms},
          {"busy_fraction", L.wall_seconds > 0 ? b.busy_seconds() / L.wall_seconds : 0},
          {"engine_idle_s", b.idle_seconds},
          {"http_stream_s", b.http_stream_seconds},
          {"http_stream_us_per_token", tokens > 0 ? 1e6 * b.http_stream_seconds / tokens : 0}};
}

json level_json(const LevelResult& L) {
  return {{"concurrency", L.concurrency},
          {"requests", L.sent},
          {"succeeded", L.succeeded},
          {"failed", L.failed},
          {"first_error", L.first_error.empty() ? json(nullptr) : json(L.first_error)},
          {"wall_s", L.wall_seconds},
          {"prompt_tokens", L.prompt_tokens},
          {"completion_tokens", L.completion_tokens},
          {"output_tok_s", per_second(static_cast<double>(L.completion_tokens), L.wall_seconds)},
          {"request_s", per_second(static_cast<double>(L.succeeded), L.wall_seconds)},
          {"ttft_ms", ms_json(L.ttft)},
          {"itl_ms", ms_json(L.itl)},
          {"e2e_ms", ms_json(L.e2e)},
          {"itl_tokens_counted", L.counted_per_chunk ? "usage_per_chunk" : "one_per_chunk"},
          {"steps", L.steps ? steps_json(*L.steps, L) : json(nullptr)}};
}

}  // namespace

bool run_passed(const ServeBenchRun& run) {
  for (const LevelResult& L : run.levels)
    if (L.failed > 0) return false;
  return !run.identity || run.identity->identical == run.identity->checked;
}

json report_json(const ServeBenchRun& run) {
  const ServeBenchOptions& o = run.options;
  json levels = json::array();
  for (const LevelResult& L : run.levels) levels.push_back(level_json(L));
  json identity = nullptr;
  if (run.identity) {
    json mismatches = json::array();
    for (const auto& m : run.identity->mismatches) mismatches.push_back({{"request", m.index}, {"what", m.what}});
    identity = {{"concurrency", run.identity->concurrency},
                {"checked", run.identity->checked},
                {"identical", run.identity->identical},
                {"mismatches", mismatches}};
  }
  return {{"url", o.url.text},
          {"model", o.model},
          {"endpoint", "completions"},
          {"server", {{"max_model_len", run.server.max_model_len}, {"vocab_size", run.server.vocab_size}}},
          {"input_len", o.input_len},
          {"output_len", o.output_len},
          {"vocab_size", o.vocab_size},
          {"seed", o.seed},
          {"temperature", o.temperature},
          {"levels", levels},
          {"identity", identity},
          {"passed", run_passed(run)}};
}

std::string report_table(const ServeBenchRun& run) {
  const ServeBenchOptions& o = run.options;
  std::string out = format("server %s, model %s: input %lld, output %lld tokens, temperature %g, seed %llu\n",
                           o.url.text.c_str(), o.model.c_str(), static_cast<long long>(o.input_len),
                           static_cast<long long>(o.output_len), o.temperature,
                           static_cast<unsigned long long>(o.seed));
  out += format("%5s %6s %5s %8s %10s %7s %22s %22s %16s\n", "conc", "reqs", "fail", "wall s", "out tok/s",
                "req/s", "TTFT p50/p90/p99 ms", "ITL p50/p90/p99 ms", "E2E p50/p99 ms");
  for (const LevelResult& L : run.levels)
    out += format("%5d %6lld %5lld %8.2f %10.1f %7.2f %6.1f/%6.1f/%8.1f %6.2f/%6.2f/%8.2f %7.0f/%8.0f\n", L.concurrency,
                  static_cast<long long>(L.sent), static_cast<long long>(L.failed), L.wall_seconds,
                  per_second(static_cast<double>(L.completion_tokens), L.wall_seconds),
                  per_second(static_cast<double>(L.succeeded), L.wall_seconds), 1000 * L.ttft.p50,
                  1000 * L.ttft.p90, 1000 * L.ttft.p99, 1000 * L.itl.p50, 1000 * L.itl.p90, 1000 * L.itl.p99,
                  1000 * L.e2e.p50, 1000 * L.e2e.p99);
  for (const LevelResult& L : run.levels)
    if (!L.first_error.empty())
      out += format("concurrency %d: first error: %s\n", L.concurrency, L.first_error.substr(0, 300).c_str());
  for (const LevelResult& L : run.levels)
    if (!L.counted_per_chunk) {
      out += "ITL: the server sent no usage per chunk; each chunk counted as one token\n";
      break;
    }
  if (!run.levels.empty() && run.levels.front().steps) {
    out += "engine step breakdown (ms per step by phase; rows and sequences per step):\n";
    std::string head = format("%5s %7s %9s %9s", "conc", "steps", "rows", "seqs");
    for (const auto& [phase, s] : run.levels.front().steps->phase_seconds) head += format(" %8s", phase.c_str());
    out += head + format(" %8s %6s %11s\n", "total", "busy", "SSE us/tok");
    for (const LevelResult& L : run.levels) {
      if (!L.steps) continue;
      const StepBreakdown& b = *L.steps;
      std::string row = format("%5d %7.0f %9.2f %9.2f", L.concurrency, b.steps, b.steps > 0 ? b.rows / b.steps : 0,
                               b.steps > 0 ? b.sequences / b.steps : 0);
      for (const auto& [phase, s] : b.phase_seconds) row += format(" %8.3f", b.ms_per_step(s));
      const double tokens = static_cast<double>(L.completion_tokens);
      row += format(" %8.3f %5.0f%% %11.1f\n", b.ms_per_step(b.busy_seconds()),
                    L.wall_seconds > 0 ? 100 * b.busy_seconds() / L.wall_seconds : 0,
                    tokens > 0 ? 1e6 * b.http_stream_seconds / tokens : 0);
      out += row;
    }
  } else if (!run.levels.empty()) {
    out += "engine step breakdown: not available (the server's /metrics has no lockstep_steps_total)\n";
  }
  if (run.identity) {
    const IdentityResult& id = *run.identity;
    out += format("identity: %d/%d identical (concurrency %d rerun one at a time)\n", id.identical, id.checked,
                  id.concurrency);
    for (const auto& m : id.mismatches)
      out += format("  request %lld: %s\n", static_cast<long long>(m.index), m.what.c_str());
  }
  out += run_passed(run) ? "passed\n" : "FAILED\n";
  return out;
}

}  // namespace lockstep::client
