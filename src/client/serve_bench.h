// The serving benchmark (`lockstep bench-serve`): a sweep of concurrency levels against a running
// OpenAI-compatible server, each level a number of streamed /v1/completions requests kept in
// flight by that many clients (one thread and keep-alive connection each), then an identity check
// that reruns some requests of the highest level one at a time and compares their text.
//
// Prompts are random token ids from a pool indexed from 0: prompt i is a function of (seed, i)
// alone, so any request can be rerun exactly, and each level draws fresh indices, so no level
// finds another's prompts in the server's prefix cache.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/completion_stream.h"
#include "client/http_client.h"
#include "client/latency_stats.h"
#include "client/step_breakdown.h"

namespace lockstep::client {

// What GET /v1/models says about the first model listed. 0 where the server does not say.
struct ServerInfo {
  std::string model;
  int64_t max_model_len = 0;  // `max_model_len`, else `context_length`, else llama-server's meta.n_ctx
  int64_t vocab_size = 0;     // lockstep's `vocab_size`, else llama-server's meta.n_vocab
};
ServerInfo query_server(HttpConnection& connection);
// The reply's body parsed into ServerInfo; an error naming what was expected when it is no list.
ServerInfo parse_models_reply(const std::string& body);

struct ServeBenchOptions {
  Url url;
  std::string api_key;
  std::string model;
  std::string path = "/v1/completions";
  std::vector<int> concurrency;
  int64_t requests = 0;  // per level; 0: max(4 x concurrency, 16)
  double seconds = 0;    // > 0: each level starts requests for this long instead
  int64_t input_len = 1024, output_len = 128;
  int64_t vocab_size = 0;
  uint64_t seed = 0;
  double temperature = 0;
  int identity_checks = 8;
  std::chrono::seconds timeout{600};
};

// Prompt `index` of the pool: `length` ids drawn uniformly from [0, vocab).
std::vector<int32_t> pool_prompt(uint64_t seed, int64_t index, int64_t length, int64_t vocab);

// The request for prompt `index` (its sampling seed is seed + index, so seeded sampling differs
// between requests and reproduces on a rerun).
CompletionRequest pool_request(const ServeBenchOptions& options, int64_t index);

struct LevelResult {
  int concurrency = 0;
  int64_t first_index = 0;  // its prompts are first_index, first_index + 1, ...
  int64_t end_index = 0;    // one past the last prompt index it used (the next level's first)
  int64_t sent = 0, succeeded = 0, failed = 0;
  std::string first_error;
  double wall_seconds = 0;  // from the first request sent to the last finished
  int64_t prompt_tokens = 0, completion_tokens = 0;  // of the requests that succeeded
  bool counted_per_chunk = true;  // every response carried running usage (exact ITL)
  Distribution ttft, itl, e2e;    // seconds, over the requests that succeeded
  std::optional<StepBreakdown> steps;  // from /metrics; absent when the server has no profile
  std::vector<RequestRecord> records;  // by prompt index
};

// Runs one level. `progress` receives a line now and then (for stderr).
LevelResult run_level(const ServeBenchOptions& options, int concurrency, int64_t first_index,
                      const std::function<void(const std::string&)>& progress);

struct IdentityResult {
  int concurrency = 0;  // of the level whose requests were rerun
  int checked = 0, identical = 0;
  struct Mismatch {
    int64_t index = 0;
    std::string what;  // "text differs at byte N", "12 tokens against 16", or the rerun's error
  };
  std::vector<Mismatch> mismatches;
};

// Reruns up to options.identity_checks of `level`'s successful requests (evenly spaced by prompt
// index) one at a time and compares each text and token count with what it produced under load.
IdentityResult check_identity(const ServeBenchOptions& options, const LevelResult& level,
                              const std::function<void(const std::string&)>& progress);

}  // namespace lockstep::client
