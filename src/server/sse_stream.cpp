// Streaming responses (server-sent events). httplib calls the provider again and again on the
// connection's thread; each call waits briefly for engine events and writes what they make
// sendable. A failed write or a dead socket means the client left: its sequences are cancelled.
#include <chrono>

#include "server/api_error.h"
#include "server/choice_text.h"
#include "server/generation.h"
#include "server/response_format.h"

namespace lockstep::server {

namespace {

using Ms = std::chrono::milliseconds;

struct SseState {
  ParsedRequest parsed;
  ResponseHeader header;
  const ServingContext* ctx = nullptr;
  HttpStats* stats = nullptr;
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<ChoiceText> texts;
  std::vector<size_t> text_offset;  // completions logprobs: offset of the next token's text
  std::vector<bool> finished;
  size_t open = 0;                  // choices not finished
  int64_t completion_tokens = 0;
  bool started = false, done = false;

  void cancel_all() {
    for (auto& s : streams) s->cancel();
  }
};

// Reads what choice i has ready (waiting up to `wait` for the first event) and appends its chunk.
void pump_choice(SseState& st, size_t i, Ms wait, std::string& out) {
  std::string delta, finish;
  std::vector<TokenLogprob> lps;
  StreamEvent ev;
  while (!st.finished[i] && st.streams[i]->next(ev, wait)) {
    wait = Ms(0);
    if (ev.kind == StreamEvent::Kind::Token) {
      delta += st.texts[i].push(ev.token);
      if (ev.logprob) lps.push_back(*ev.logprob);
      ++st.completion_tokens;
      continue;
    }
    st.finished[i] = true;
    --st.open;
    if (ev.finish_reason == "error" || ev.finish_reason == "cancelled") {
      // Headers are gone already; OpenAI clients raise an APIError on an "error" event.
      const ApiError e(500, ev.finish_reason == "error" ? "generation failed: " + ev.error
                                                        : "the request was cancelled (the server is stopping)",
                       "", "server_error", ev.finish_reason == "error" ? "engine_error" : "cancelled");
      out += sse_event(error_body(e));
      return;
    }
    delta += st.texts[i].finish(ev.text_limit);
    finish = ev.finish_reason;
  }
  if (delta.empty() && lps.empty() && finish.empty()) return;
  nlohmann::ordered_json lp_json = nullptr;
  if (st.parsed.logprobs >= 0) {
    lp_json = logprobs_json(st.header.endpoint, st.ctx->tokenizer, lps, st.text_offset[i]);
    for (const auto& t : lp_json.value("tokens", nlohmann::ordered_json::array()))
      st.text_offset[i] += t.get<std::string>().size();
  }
  out += sse_event(stream_chunk(st.header, static_cast<int>(i), delta, false, finish,
                                std::move(lp_json), st.parsed.include_usage));
}

bool provide(SseState& st, httplib::DataSink& sink) {
  std::string out;
  if (!st.started) {
    st.started = true;
    // Chat streams open with the role, as OpenAI's do; clients use it to start the message.
    if (st.header.endpoint == Endpoint::Chat)
      for (size_t i = 0; i < st.streams.size(); ++i)
        out += sse_event(stream_chunk(st.header, static_cast<int>(i), "", true, "", nullptr,
                                      st.parsed.include_usage));
  }
  // One choice: block on it. Several: a short wait on each in turn.
  const Ms wait = st.streams.size() == 1 ? Ms(200) : Ms(20);
  for (size_t i = 0; i < st.streams.size(); ++i)
    if (!st.finished[i]) pump_choice(st, i, wait, out);
  if (st.open == 0) {
    if (st.parsed.include_usage)
      out += sse_event(usage_chunk(st.header, static_cast<int64_t>(st.parsed.request.prompt.size()),
                                   st.completion_tokens));
    out += "data: [DONE]\n\n";
  }
  if (!out.empty() ? !sink.write(out.data(), out.size()) : !sink.is_writable()) {
    st.cancel_all();
    return false;
  }
  if (st.open == 0) {
    st.done = true;
    sink.done();
  }
  return true;
}

}  // namespace

void respond_stream(const ParsedRequest& p, const ServingContext& ctx, HttpStats& stats,
                    httplib::Response& res) {
  auto st = std::make_shared<SseState>();
  st->streams = submit_choices(p, *ctx.engine);
  st->parsed = p;
  st->header = new_response_header(p.endpoint, ctx.model_name);
  st->ctx = &ctx;
  st->stats = &stats;
  for (size_t i = 0; i < st->streams.size(); ++i) st->texts.emplace_back(ctx.tokenizer, p.request.options.stop);
  st->text_offset.assign(st->streams.size(), 0);
  st->finished.assign(st->streams.size(), false);
  st->open = st->streams.size();
  ++stats.open_streams;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // proxies must not hold the stream back
  res.set_chunked_content_provider(
      "text/event-stream", [st](size_t, httplib::DataSink& sink) { return provide(*st, sink); },
      [st](bool) {
        // Called once the response ends, however it ends: a stream not finished lost its client.
        if (!st->done) {
          st->cancel_all();
          ++st->stats->disconnects;
        }
        --st->stats->open_streams;
      });
}

}  // namespace lockstep::server
