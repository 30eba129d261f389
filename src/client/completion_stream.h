// One streamed /v1/completions request as a benchmark sees it: the request body, and a tally of
// its server-sent events that records when tokens arrived, the text, the usage and whatever went
// wrong (an error event, a missing [DONE], a token count other than the one asked for).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "client/http_client.h"
#include "client/latency_stats.h"

namespace lockstep::client {

struct CompletionRequest {
  std::string model;
  std::vector<int32_t> prompt;  // token ids
  int64_t max_tokens = 0;
  double temperature = 0;
  uint64_t seed = 0;
};

// The JSON body: a token-id prompt, max_tokens with ignore_eos (every request produces exactly
// max_tokens), streaming with usage on the final chunk and on every chunk (vLLM's
// continuous_usage_stats, which tells how many tokens each chunk holds).
std::string completion_body(const CompletionRequest& request);

// Reads the events of one response in order; `seconds` is when each arrived, from the request's
// start.
class StreamTally {
 public:
  void on_event(std::string_view data, double seconds);

  // Closes the tally: the error to report, or "" when the stream was complete and held
  // `expected_tokens` completion tokens.
  std::string verdict(int64_t expected_tokens) const;

  const std::string& text() const { return text_; }
  const std::vector<TokenArrival>& arrivals() const { return arrivals_; }
  int64_t completion_tokens() const { return usage_completion_; }  // -1: no usage came
  // Whether chunks carried running usage (so arrivals count tokens exactly); without it every
  // chunk with text counts as one token, as vLLM's benchmark counts them.
  bool counted_per_chunk() const { return counted_; }

 private:
  std::string text_;
  std::vector<TokenArrival> arrivals_;
  int64_t seen_tokens_ = 0;       // tokens accounted to arrivals so far
  int64_t usage_completion_ = -1;
  bool counted_ = false, done_ = false;
  std::string error_;             // the first error event's message, or a malformed event
};

// What one request gave.
struct RequestRecord {
  int64_t index = 0;  // the prompt's index in the benchmark's prompt pool
  bool ok = false;
  std::string error;
  double start = 0;   // seconds from the level's start to sending
  double ttft = 0, e2e = 0;
  std::vector<double> itl;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  bool counted_per_chunk = false;
  std::string text;
};

// Sends `request` on `connection` to `path` and reads its stream to the end. Never throws for a
// failure of the request itself (connection, status, stream): the record says what went wrong.
RequestRecord run_completion(HttpConnection& connection, const std::string& path,
                             const CompletionRequest& request);

}  // namespace lockstep::client
