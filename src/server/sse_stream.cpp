// Streaming responses (server-sent events). Each poll reads what the engine has emitted for every
// choice, without waiting, and appends the chunks that makes sendable; the connection writes them.
#include <algorithm>
#include <chrono>

#include "server/api_error.h"
#include "server/choice_text.h"
#include "server/generation.h"
#include "server/reasoning.h"
#include "server/response_format.h"
#include "server/tools/tool_family.h"
#include "server/tools/tool_stream.h"

namespace lockstep::server {

namespace {

class SseResponse : public PendingResponse {
 public:
  SseResponse(const ParsedRequest& p, const ServingContext& ctx, HttpStats& stats)
      : parsed_(p), header_(new_response_header(p.endpoint, ctx.model_name)), ctx_(ctx), stats_(stats),
        streams_(submit_choices(p, *ctx.engine)), text_offset_(streams_.size(), 0),
        finished_(streams_.size(), false), open_(streams_.size()) {
    calls_streamed_.assign(streams_.size(), 0);
    for (size_t i = 0; i < streams_.size(); ++i) {
      texts_.emplace_back(ctx.tokenizer, p.request.options.stop, p.shown_ids);
      splitters_.emplace_back(p.reasoning);
      if (p.tool_parser) tool_streams_.emplace_back(p.tool_parser, p.parallel_tool_calls);
    }
    ++stats_.open_streams;
  }
  ~SseResponse() override { --stats_.open_streams; }

  bool streaming() const override { return true; }

  void set_wake(std::function<void()> wake) override {
    for (auto& s : streams_) s->on_event(wake);
  }

  bool poll(std::string& out, HttpResponse&) override {
    if (done_) return true;
    if (!started_) {
      started_ = true;
      // Chat streams open with the role, as OpenAI's do; clients use it to start the message.
      if (header_.endpoint == Endpoint::Chat)
        for (size_t i = 0; i < streams_.size(); ++i)
          out += chunk_event(stream_chunk(header_, static_cast<int>(i), "", "", true, "", nullptr,
                                        parsed_.include_usage));
    }
    for (size_t i = 0; i < streams_.size(); ++i)
      if (!finished_[i]) pump_choice(i, out);
    if (open_ > 0) return false;
    if (parsed_.include_usage)
      out += sse_event(usage_chunk(header_, static_cast<int64_t>(parsed_.request.prompt.size()),
                                   completion_tokens_, cached_tokens_, reasoning_tokens_));
    out += "data: [DONE]\n\n";
    done_ = true;
    return true;
  }

  void abandon() override {
    if (done_) return;
    for (auto& s : streams_) s->cancel();
    ++stats_.disconnects;
    done_ = true;
  }

 private:
  // Reads what choice i has ready and appends its chunk.
  void pump_choice(size_t i, std::string& out) {
    std::string delta, finish;
    std::vector<TokenLogprob> lps;
    StreamEvent ev;
    while (!finished_[i] && streams_[i]->next(ev, std::chrono::milliseconds(0))) {
      if (ev.kind == StreamEvent::Kind::Token) {
        delta += texts_[i].push(ev.token);
        if (ev.logprob) lps.push_back(*ev.logprob);
        ++completion_tokens_;
        continue;
      }
      finished_[i] = true;
      --open_;
      if (ev.finish_reason == "error" || ev.finish_reason == "cancelled") {
        // Headers are gone already; OpenAI clients raise an APIError on an "error" event.
        const ApiError e(500, ev.finish_reason == "error" ? "generation failed: " + ev.error
                                                          : "the request was cancelled (the server is stopping)",
                         "", "server_error", ev.finish_reason == "error" ? "engine_error" : "cancelled");
        out += sse_event(error_body(e));
        return;
      }
      delta += texts_[i].finish(ev.text_limit);
      finish = ev.finish_reason;
      if (header_.endpoint == Endpoint::Chat)
        reasoning_tokens_ += texts_[i].tokens_until(
            ReasoningSplitter::reasoning_end(texts_[i].sent(), parsed_.reasoning));
      cached_tokens_ = open_ + 1 == streams_.size() ? ev.cached_tokens : std::min(cached_tokens_, ev.cached_tokens);
    }
    // The text of this poll, split as the whole response's would be (ReasoningSplitter).
    ReasoningParts parts = splitters_[i].push(delta);
    if (!finish.empty()) {
      ReasoningParts rest = splitters_[i].finish();
      parts.reasoning += rest.reasoning;
      parts.content += rest.content;
    }
    std::string text = header_.endpoint == Endpoint::Chat ? parts.content : delta;
    std::vector<tools::ToolCall> calls;
    if (!tool_streams_.empty()) {
      // Call markup never reaches delta.content: the stream holds it until it is a call or text.
      tools::ToolCallStream& ts = tool_streams_[i];
      tools::ToolCallStream::Delta d = ts.push(text);
      if (!finish.empty()) {
        tools::ToolCallStream::Delta rest = ts.finish();
        d.content += rest.content;
        for (auto& c : rest.calls) d.calls.push_back(std::move(c));
      }
      text = std::move(d.content);
      calls = std::move(d.calls);
      if (!finish.empty() && finish == "stop" && ts.calls_sent() > 0) finish = "tool_calls";
    }
    if (text.empty() && parts.reasoning.empty() && lps.empty() && finish.empty() && calls.empty()) return;
    nlohmann::ordered_json lp_json = nullptr;
    if (parsed_.logprobs >= 0) {
      lp_json = logprobs_json(header_.endpoint, ctx_.tokenizer, lps, text_offset_[i]);
      for (const auto& t : lp_json.value("tokens", nlohmann::ordered_json::array()))
        text_offset_[i] += t.get<std::string>().size();
    }
    if (calls.empty()) {
      out += chunk_event(stream_chunk(header_, static_cast<int>(i), text, parts.reasoning, false, finish,
                                    std::move(lp_json), parsed_.include_usage));
      return;
    }
    // Text and logprobs first, then each call, then the finish reason on a chunk of its own.
    if (!text.empty() || !parts.reasoning.empty() || !lp_json.is_null())
      out += chunk_event(stream_chunk(header_, static_cast<int>(i), text, parts.reasoning, false, "",
                                    std::move(lp_json), parsed_.include_usage));
    for (auto& c : calls) {
      const IdentifiedCall call{tools::new_tool_call_id(ctx_.tool_family), std::move(c)};
      for (const auto& chunk : tool_call_chunks(header_, static_cast<int>(i), calls_streamed_[i]++, call,
                                                parsed_.include_usage))
        out += chunk_event(chunk);
    }
    if (!finish.empty())
      out += chunk_event(stream_chunk(header_, static_cast<int>(i), "", "", false, finish, nullptr,
                                    parsed_.include_usage));
  }

  // A chunk as an event. With stream_options.continuous_usage_stats (vLLM's extension) it carries
  // the usage so far, so a client knows how many tokens each chunk holds (several, when a
  // speculative round or a slow reader gathers them); otherwise its usage is null.
  std::string chunk_event(nlohmann::ordered_json chunk) const {
    if (parsed_.continuous_usage) {
      const auto prompt = static_cast<int64_t>(parsed_.request.prompt.size());
      chunk["usage"] = {{"prompt_tokens", prompt},
                        {"completion_tokens", completion_tokens_},
                        {"total_tokens", prompt + completion_tokens_}};
    }
    return sse_event(chunk);
  }

  ParsedRequest parsed_;
  ResponseHeader header_;
  const ServingContext& ctx_;
  HttpStats& stats_;
  std::vector<std::shared_ptr<RequestStream>> streams_;
  std::vector<ChoiceText> texts_;
  std::vector<ReasoningSplitter> splitters_;  // chat: reasoning vs content (kOff passes all through)
  std::vector<tools::ToolCallStream> tool_streams_;  // chat with tools: one per choice, else none
  std::vector<int> calls_streamed_;                  // per choice: calls sent so far
  std::vector<size_t> text_offset_;  // completions logprobs: offset of the next token's text
  std::vector<bool> finished_;
  size_t open_;                      // choices not finished
  int64_t completion_tokens_ = 0;
  int64_t reasoning_tokens_ = 0;  // of those, in the choices' reasoning blocks
  int64_t cached_tokens_ = 0;  // the fewest prompt tokens any choice found in the prefix cache
  bool started_ = false, done_ = false;
};

}  // namespace

HttpResponse stream_head() {
  HttpResponse head;
  head.content_type = "text/event-stream";
  head.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};  // proxies must not hold it back
  return head;
}

std::shared_ptr<PendingResponse> stream_response(const ParsedRequest& p, const ServingContext& ctx,
                                                 HttpStats& stats) {
  return std::make_shared<SseResponse>(p, ctx, stats);
}

}  // namespace lockstep::server
