#include "client/completion_stream.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "client/sse_reader.h"

namespace lockstep::client {

namespace {

using json = nlohmann::json;

// The message of an OpenAI error body ({"error": {"message": ...}}), else the text itself.
std::string error_message(const json& j, std::string_view raw) {
  if (j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
    if (e.is_string()) return e.get<std::string>();
  }
  return std::string(raw.substr(0, 300));
}

}  // namespace

std::string completion_body(const CompletionRequest& r) {
  json body = {{"model", r.model},
               {"prompt", r.prompt},
               {"max_tokens", r.max_tokens},
               {"temperature", r.temperature},
               {"seed", r.seed},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}};
  return body.dump();
}

void StreamTally::on_event(std::string_view data, double seconds) {
  if (done_) return;
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  const json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    if (error_.empty()) error_ = "malformed event: " + std::string(data.substr(0, 200));
    return;
  }
  if (j.contains("error")) {
    if (error_.empty()) error_ = "error event: " + error_message(j, data);
    return;
  }
  const json choices = j.value("choices", json::array());
  const json usage = j.value("usage", json());
  std::string piece;
  for (const json& c : choices)
    if (c.contains("text") && c["text"].is_string()) piece += c["text"].get<std::string>();
  text_ += piece;
  int64_t tokens = 0;
  if (usage.is_object() && usage.contains("completion_tokens") && usage["completion_tokens"].is_number_integer()) {
    const int64_t total = usage["completion_tokens"];
    usage_completion_ = total;
    if (choices.empty()) return;  // the final usage chunk carries no tokens of its own
    counted_ = true;
    tokens = total - seen_tokens_;
  } else if (!piece.empty()) {
    tokens = 1;
  }
  if (tokens <= 0) return;
  seen_tokens_ += tokens;
  arrivals_.push_back({seconds, tokens});
}

std::string StreamTally::verdict(int64_t expected_tokens) const {
  if (!error_.empty()) return error_;
  if (!done_) return "the stream ended without data: [DONE]";
  if (usage_completion_ < 0) return "no usage in the stream (stream_options.include_usage ignored?)";
  if (usage_completion_ != expected_tokens)
    return "wrong token count: " + std::to_string(usage_completion_) + " completion tokens, asked for " +
           std::to_string(expected_tokens);
  if (arrivals_.empty()) return "no token arrived";
  return "";
}

RequestRecord run_completion(HttpConnection& connection, const std::string& path, const CompletionRequest& r) {
  using Clock = std::chrono::steady_clock;
  RequestRecord rec;
  rec.prompt_tokens = static_cast<int64_t>(r.prompt.size());
  const std::string body = completion_body(r);
  StreamTally tally;
  SseReader sse;
  std::string body_start;
  int status = 0;
  const Clock::time_point t0 = Clock::now();
  try {
    status = connection.post(path, body, [&](std::string_view piece) {
      const double t = std::chrono::duration<double>(Clock::now() - t0).count();
      // The status comes back with the end of the body: keep the start for an error reply's message.
      if (body_start.size() < 4096) body_start.append(piece.substr(0, 4096 - body_start.size()));
      for (const std::string& event : sse.feed(piece)) tally.on_event(event, t);
    });
  } catch (const ConnectionError& e) {
    rec.error = e.what();
    return rec;
  }
  rec.e2e = std::chrono::duration<double>(Clock::now() - t0).count();
  if (status != 200) {
    const json j = json::parse(body_start, nullptr, false);
    rec.error = "HTTP " + std::to_string(status) + ": " + error_message(j, body_start);
    return rec;
  }
  rec.error = tally.verdict(r.max_tokens);
  rec.ok = rec.error.empty();
  rec.text = tally.text();
  rec.completion_tokens = tally.completion_tokens();
  rec.counted_per_chunk = tally.counted_per_chunk();
  if (!tally.arrivals().empty()) rec.ttft = tally.arrivals().front().seconds;
  rec.itl = inter_token_latencies(tally.arrivals());
  return rec;
}

}  // namespace lockstep::client
