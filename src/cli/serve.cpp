// lockstep serve: the OpenAI-compatible HTTP server (src/server/) over the continuous-batching
// engine (src/scheduler/). SIGTERM or SIGINT stops it gracefully: new requests get 503, every
// admitted request runs to its end, then the process exits 0.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <thread>

#include "cli/command.h"
#include "cli/serving_setup.h"
#include "core/error.h"
#include "scheduler/engine.h"
#include "server/constraint_cache.h"
#include "server/http_server.h"
#include "server/prompt_limit.h"

namespace lockstep::cli {
namespace {

struct ServeFlags {
  ModelFlags model;
  SpecFlags spec;
  server::ServerConfig server;
  EngineOptions engine;
  std::string alias;
};

// The step's token budget where the command line sets none. On the GPU a forward of more rows
// costs little more than one of fewer (the weights are read once a step, the linears run at a
// higher fraction of the tensor cores), so it takes 2048 tokens a step and a 1024-token prompt in
// one chunk: on the H200, 1024-token prompts served 1.15x (64 clients) to 1.23x (256) the output
// tokens/s of 512 / 256, and 128-token prompts 1.08x (docs/benchmarks.md, "Serving at
// concurrency"); the price is ITL p99 (a decode row waits for the step's prefill chunks). A CPU
// forward costs in proportion to its rows, so there the smaller steps keep streams flowing.
// 0: not given (the flags take 1 and up).
void default_step_budget(ServeFlags& f) {
  const bool gpu = f.model.device == "cuda";
  if (f.engine.max_step_tokens == 0) f.engine.max_step_tokens = gpu ? 2048 : 512;
  if (f.engine.prefill_chunk == 0) f.engine.prefill_chunk = gpu ? 1024 : 256;
}

// Stop signals: the handler only writes the signal number to a pipe (async-signal-safe, and
// correct whichever thread the kernel picks to run it, including threads started before main);
// one watcher thread reads it: the first signal starts the graceful stop, a second exits at once.
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  const char c = static_cast<char>(sig);
  [[maybe_unused]] const ssize_t n = write(g_signal_pipe[1], &c, 1);
}

void install_stop_signals() {
  if (pipe(g_signal_pipe) != 0) fail("cannot create the signal pipe");
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the server
}

std::thread watch_stop_signals(server::HttpServer& http) {
  return std::thread([&http] {
    char c = 0;
    while (read(g_signal_pipe[0], &c, 1) != 1) {
    }
    std::fprintf(stderr, "lockstep: %s: finishing in-flight requests, then exiting (again to force)\n",
                 c == SIGINT ? "SIGINT" : "SIGTERM");
    std::thread drainer([&http] { http.drain_and_stop(); });
    drainer.detach();
    while (read(g_signal_pipe[0], &c, 1) != 1) {
    }
    std::fprintf(stderr, "lockstep: second signal: exiting now\n");
    std::_Exit(1);
  });
}

int run_serve(ServeFlags& f) {
  install_stop_signals();
  default_step_budget(f);

  apply_numerics(f.spec);
  int64_t kv_tokens = f.model.ctx_size;
  if (kv_tokens == 0) {
    // Default: every parallel sequence may use a full context (up to 4096 tokens each).
    const std::string dir = resolve_model_dir(f.model);
    const int64_t max_pos = load_model_config(dir).max_position_embeddings;
    kv_tokens = static_cast<int64_t>(f.engine.parallel) * (max_pos > 0 ? std::min<int64_t>(max_pos, 4096) : 4096);
  }
  ServingBundle b = load_serving_bundle(f.model, f.spec, kv_tokens);
  if (f.spec.spec == "mtp" && !b.model->mtp()) fail("--spec mtp: the model has no MTP head");

  Engine engine(*b.model, f.engine, b.draft.get(), b.assistant.get());
  server::ServingContext ctx;
  ctx.engine = &engine;
  ctx.tokenizer = b.tokenizer.get();
  ctx.chat_template = b.chat_template;
  ctx.template_vars = b.template_vars;
  ctx.eos_ids = b.eos_ids;
  ctx.model_name = !f.alias.empty() ? f.alias : std::filesystem::path(b.dir).lexically_normal().filename().string();
  if (ctx.model_name.empty()) ctx.model_name = std::filesystem::path(b.dir).parent_path().filename().string();
  ctx.context_tokens = engine.context_tokens();  // the rule the engine checks requests with
  if (b.tokenizer) ctx.max_prompt_bytes = server::prompt_byte_limit(*b.tokenizer, ctx.context_tokens);
  ctx.vocab_size = b.model->config().vocab_size;
  if (b.tokenizer) {
    ctx.tool_family = server::tools::tool_family(b.tokenizer->chat_template());
    ctx.tool_marker_ids = server::tools::special_marker_ids(ctx.tool_family, *b.tokenizer);
  }
  // response_format: the constraint vocabulary is built once for the model, on first use.
  if (b.tokenizer)
    ctx.constraints = std::make_shared<server::ConstraintCache>(*b.tokenizer, ctx.eos_ids, ctx.vocab_size, 64,
                                                                ctx.tool_marker_ids);
  f.server.default_spec = f.spec.spec;
  f.server.default_draft_width = f.spec.draft_width;
  ctx.config = f.server;

  server::HttpServer http(std::move(ctx));
  const int port = http.bind();
  const std::string spec_limit =
      f.engine.spec_max_batch > 0
          ? " (none past " + std::to_string(f.engine.spec_max_batch) + " decoding)"
          : "";
  if (!b.chat_template) std::fprintf(stderr, "lockstep: chat disabled: %s\n", b.chat_template_error.c_str());
  std::fprintf(stderr,
               "lockstep: serving %s as \"%s\" (parallel %d, KV %lld tokens, context %lld, step "
               "tokens %lld, prefill chunk %lld, spec %s%s%s)\n"
               "lockstep: listening on http://%s:%d\n",
               b.dir.c_str(), http.context().model_name.c_str(), f.engine.parallel,
               static_cast<long long>(kv_tokens), static_cast<long long>(http.context().context_tokens),
               static_cast<long long>(f.engine.max_step_tokens),
               static_cast<long long>(f.engine.prefill_chunk),
               f.spec.spec.c_str(), spec_limit.c_str(),
               f.server.api_key.empty() ? "" : ", API key required",
               f.server.host.c_str(), port);
  std::thread watcher = watch_stop_signals(http);
  watcher.detach();  // it ends the process itself on a second signal
  http.serve();
  std::fprintf(stderr, "lockstep: stopped\n");
  return 0;
}

const Command kServe("serve", "OpenAI-compatible HTTP server with continuous batching", [](CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  add_model_flags(app, f->model, false);
  add_spec_flags(app, f->spec);
  app.add_option("--host", f->server.host, "Address to listen on (default 127.0.0.1)");
  app.add_option("--port", f->server.port, "Port (default 8080; 0: any free port, printed)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--parallel", f->engine.parallel, "Sequences decoded at once (default 8)")
      ->check(CLI::Range(1, 1024));
  f->engine.prefill_chunk = f->engine.max_step_tokens = 0;  // by device (default_step_budget)
  app.add_option("--prefill-chunk", f->engine.prefill_chunk,
                 "Prompt tokens per sequence per step (default 256 on the CPU, 1024 on CUDA); "
                 "never changes output")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--step-tokens", f->engine.max_step_tokens,
                 "Tokens in one forward over all sequences (default 512 on the CPU, 2048 on CUDA: "
                 "more throughput, longer gaps between a stream's tokens while prompts prefill); "
                 "never changes output")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--max-queue", f->engine.max_queue, "Waiting requests before 503 (default 64)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 20));
  app.add_flag("--no-prefix-cache{false}", f->engine.prefix_cache,
               "Do not keep finished prompts' KV for reuse (never changes output)");
  app.add_option("--prefix-cache-entries", f->engine.prefix_cache_entries,
                 "States kept in the prefix cache of models with recurrent state (default 32, least "
                 "recently used evicted; attention-only models cache KV blocks while memory lasts); "
                 "0 turns the cache off")
      ->check(CLI::Range(size_t{0}, size_t{1} << 16));
  app.add_option("--kv-reserve", f->engine.kv_reserve_blocks,
                 "KV blocks kept free when admitting a request beside running ones, for their "
                 "growth (default -1: one per running sequence); never changes output")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 30));
  app.add_option("--spec-max-batch", f->engine.spec_max_batch,
                 "Speculation per step: a step in which more sequences decode than N runs them "
                 "without drafts, where verify rows cost more than they save (default 0: drafts "
                 "at any batch size); never changes output")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--api-key", f->server.api_key, "Require Authorization: Bearer KEY (all but /health)");
  app.add_option("--alias", f->alias, "Model name in responses and /v1/models (default: the directory name)");
  app.add_option("--http-threads", f->server.http_threads,
                 "Worker threads that parse and tokenize requests (default 4; connections need none)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--reasoning-budget", f->server.default_reasoning_budget,
                 "Tokens a chat answer may spend in its <think> block before the server closes it, "
                 "for requests that do not set reasoning_budget (default -1: no limit; 0: no reasoning)")
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
  app.get_option("--ctx-size")->description("KV cache capacity in tokens over all sequences "
                                            "(default: parallel x min(model context, 4096))");
  return [f] { return run_serve(*f); };
});

}  // namespace
}  // namespace lockstep::cli
