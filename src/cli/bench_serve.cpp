// lockstep bench-serve: a serving benchmark client (like `vllm bench serve --dataset-name
// random`) for a running `lockstep serve` or any OpenAI-compatible server. It sweeps concurrency
// levels of streamed /v1/completions requests with random token-id prompts, reports throughput
// and latency percentiles per level plus lockstep's per-step engine breakdown from /metrics, and
// then checks that requests rerun alone give the text they gave under load. The work is in
// src/client/; this file is the flags and the printing.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "client/serve_bench.h"
#include "client/serve_bench_report.h"
#include "core/error.h"

namespace lockstep::cli {
namespace {

struct BenchServeFlags {
  std::string url = "http://127.0.0.1:8080";
  std::string endpoint = "completions";
  client::ServeBenchOptions options;
  std::vector<int> concurrency = {1, 8, 64, 256};
  int64_t vocab_size = 0;  // 0: the server's
  int timeout = 600;
  int warmup = 1;
  bool json_out = false;
};

void progress(const std::string& line) { std::fprintf(stderr, "bench-serve: %s\n", line.c_str()); }

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

// Each client holds a socket and its io_context's descriptors (about 3 in all, measured), so 256
// clients would exceed the common default of 1024 open files. Raise the soft limit to the hard one, and
// refuse a sweep that still cannot fit rather than fail its requests one by one.
void make_room_for_clients(int clients) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    getrlimit(RLIMIT_NOFILE, &lim);
  }
  const rlim_t needed = static_cast<rlim_t>(clients) * 4 + 64;
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < needed)
    fail("--concurrency ", clients, " needs about ", needed, " open files; the limit is ", lim.rlim_cur,
         " (raise it with ulimit -n)");
}

// Fills in what the server knows (model name, vocabulary, context) and checks the flags against it.
client::ServerInfo resolve_against_server(BenchServeFlags& f) {
  client::ServeBenchOptions& o = f.options;
  client::HttpConnection connection(o.url, o.api_key, o.timeout);
  const client::ServerInfo info = client::query_server(connection);
  if (o.model.empty()) o.model = info.model;
  o.vocab_size = f.vocab_size > 0 ? f.vocab_size : info.vocab_size;
  if (o.vocab_size <= 0)
    fail("the server's /v1/models gives no vocab_size (lockstep) or meta.n_vocab (llama-server): "
         "pass --vocab-size");
  if (info.max_model_len > 0 && o.input_len + o.output_len > info.max_model_len)
    fail("--input-len ", o.input_len, " plus --output-len ", o.output_len, " exceed the server's context of ",
         info.max_model_len, " tokens (max_model_len)");
  return info;
}

int run_bench_serve(BenchServeFlags& f) {
  client::ServeBenchOptions& o = f.options;
  o.url = client::parse_url(f.url, "--url");
  o.timeout = std::chrono::seconds(f.timeout);
  o.concurrency = f.concurrency;
  if (o.concurrency.empty()) fail("--concurrency: no levels given (e.g. 1,8,64)");
  make_room_for_clients(*std::max_element(o.concurrency.begin(), o.concurrency.end()));
  client::ServeBenchRun run;
  run.server = resolve_against_server(f);
  progress("server " + o.url.text + ", model \"" + o.model + "\", vocabulary " + std::to_string(o.vocab_size) +
           ", context " + std::to_string(run.server.max_model_len));
  // Warm-up requests (not measured) load what a first request loads: a failure here is reported
  // at once, before any level runs.
  for (int i = 0; i < f.warmup; ++i) {
    client::HttpConnection connection(o.url, o.api_key, o.timeout);
    const client::RequestRecord r = client::run_completion(connection, o.path, client::pool_request(o, -1 - i));
    if (!r.ok) fail("warm-up request to ", o.url.text, o.path, " failed: ", r.error);
  }
  int64_t next_index = 0;
  for (int c : o.concurrency) {
    progress("concurrency " + std::to_string(c) + ": " +
             (o.seconds > 0 ? seconds_text(o.seconds)
                            : std::to_string(o.requests > 0 ? o.requests : std::max<int64_t>(4 * c, 16)) +
                                  " requests"));
    run.levels.push_back(client::run_level(o, c, next_index, progress));
    const client::LevelResult& L = run.levels.back();
    next_index = L.end_index;
    progress("concurrency " + std::to_string(c) + ": " + std::to_string(L.succeeded) + " succeeded, " +
             std::to_string(L.failed) + " failed in " + seconds_text(L.wall_seconds));
  }
  if (o.identity_checks > 0 && !run.levels.empty()) {
    const client::LevelResult* top = &run.levels.front();
    for (const auto& L : run.levels)
      if (L.concurrency >= top->concurrency) top = &L;
    run.identity = client::check_identity(o, *top, progress);
  }
  run.options = o;
  if (f.json_out) std::cout << client::report_json(run).dump() << "\n";
  else std::cout << client::report_table(run);
  return client::run_passed(run) ? 0 : 1;
}

const Command kBenchServe(
    "bench-serve",
    "Serving benchmark: drive a running server at a sweep of concurrency levels; throughput, TTFT, "
    "ITL, E2E latency, the engine's per-step time breakdown, and an identity check",
    [](CLI::App& sub) {
      auto f = std::make_shared<BenchServeFlags>();
      sub.add_option("--url", f->url, "The server: http://HOST[:PORT][/PATH] (default http://127.0.0.1:8080)");
      sub.add_option("--api-key", f->options.api_key, "Sent as Authorization: Bearer KEY (the server's --api-key)");
      sub.add_option("--model", f->options.model, "Model name sent with each request (default: the first of /v1/models)");
      sub.add_option("--endpoint", f->endpoint,
                     "API to drive: completions (streaming /v1/completions; the only one: prompts are token ids)")
          ->check(CLI::IsMember({"completions"}));
      sub.add_option("--concurrency", f->concurrency,
                     "Concurrency levels, run in order: requests kept in flight by that many clients, each on "
                     "its own connection (default 1,8,64,256). Start the server with --parallel and --max-queue "
                     "large enough, or the excess is refused (503) and counted as failures")
          ->delimiter(',')
          ->check(CLI::Range(1, 4096));
      auto* requests = sub.add_option("--requests", f->options.requests,
                                      "Requests per level (default: max(4 x concurrency, 16))")
                           ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
      sub.add_option("--seconds", f->options.seconds,
                     "Run each level for this many seconds instead of a number of requests (requests started "
                     "until then all finish and count)")
          ->check(CLI::PositiveNumber)
          ->excludes(requests);
      sub.add_option("--input-len", f->options.input_len, "Prompt tokens per request: random ids (default 1024)")
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
      sub.add_option("--output-len", f->options.output_len,
                     "Tokens generated per request (max_tokens with ignore_eos; default 128)")
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
      sub.add_option("--seed", f->options.seed,
                     "Seed of the prompt pool (prompt i is a function of seed and i) and of sampling (request i "
                     "sends seed + i); default 0");
      sub.add_option("--temperature", f->options.temperature, "Sampling temperature (default 0: greedy)")
          ->check(CLI::Range(0.0, 2.0));
      sub.add_option("--check-identity", f->options.identity_checks,
                     "After the sweep, rerun this many requests of the highest level one at a time and compare "
                     "their text and token count with what they gave under load (default 8; 0: off)")
          ->check(CLI::Range(0, 1 << 20));
      sub.add_option("--vocab-size", f->vocab_size,
                     "Draw prompt ids from [0, N) (default: vocab_size from the server's /v1/models; needed for "
                     "servers that do not report it)")
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
      sub.add_option("--warmup", f->warmup, "Requests sent one at a time before the sweep, not measured (default 1)")
          ->check(CLI::Range(0, 1 << 20));
      sub.add_option("--timeout", f->timeout,
                     "Seconds a request may wait for its next byte before it fails (default 600)")
          ->check(CLI::Range(1, 1 << 24));
      sub.add_flag("--json", f->json_out, "One JSON object on stdout instead of the table (progress stays on stderr)");
      sub.footer(
          "Each level reports output tokens/s (completion tokens in usage over the level's wall time), requests/s, "
          "TTFT, ITL (gaps between streamed chunks, a chunk of k tokens giving k gaps of 1/k each; tokens per chunk "
          "from the usage lockstep sends on every chunk with stream_options.continuous_usage_stats) and E2E "
          "percentiles, failures (non-200, error events, no [DONE], a token count other than --output-len) with the "
          "first error, and the engine's ms per step by phase from lockstep's /metrics.\n"
          "Exit status: 0 when every request succeeded and every identity check was identical; 1 on any failed "
          "request or identity mismatch, and on errors (an unreachable server, bad flags).");
      return [f] { return run_bench_serve(*f); };
    });

}  // namespace
}  // namespace lockstep::cli
