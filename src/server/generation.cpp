#include "server/generation.h"

#include <algorithm>

#include "core/error.h"
#include "server/api_error.h"
#include "server/choice_text.h"
#include "server/reasoning.h"
#include "server/response_format.h"
#include "server/tools/tool_family.h"

namespace lockstep::server {

std::vector<std::shared_ptr<RequestStream>> submit_choices(const ParsedRequest& p, Engine& engine) {
  std::vector<EngineRequest> choices;
  for (int i = 0; i < p.n; ++i) {
    choices.push_back(p.request);
    choices.back().options.sampling.seed += static_cast<uint64_t>(i);
  }
  try {
    return engine.submit_all(std::move(choices));  // all n or none
  } catch (const QueueFull&) {
    ApiError e(503, "the server is busy: the request queue is full; retry shortly", "",
               "server_error", "queue_full");
    e.retry_after = 1;
    throw e;
  } catch (const ShuttingDown&) {
    throw ApiError(503, "the server is shutting down", "", "server_error", "shutting_down");
  } catch (const Error& ex) {
    throw from_engine_error(ex.what());
  }
}

namespace {

class WholeResponse : public PendingResponse {
 public:
  WholeResponse(const ParsedRequest& p, const ServingContext& ctx, HttpStats& stats)
      : parsed_(p), ctx_(ctx), stats_(stats), streams_(submit_choices(p, *ctx.engine)),
        choices_(streams_.size()), finished_(streams_.size(), false) {
    for (size_t i = 0; i < streams_.size(); ++i) texts_.emplace_back(ctx.tokenizer, p.request.options.stop, p.shown_ids);
  }

  bool streaming() const override { return false; }

  void set_wake(std::function<void()> wake) override {
    for (auto& s : streams_) s->on_event(wake);
  }

  bool poll(std::string& out, HttpResponse& head) override {
    if (done_) return true;
    for (size_t i = 0; i < streams_.size(); ++i) {
      StreamEvent ev;
      while (!finished_[i] && streams_[i]->next(ev, std::chrono::milliseconds(0))) {
        if (ev.kind == StreamEvent::Kind::Token) {
          texts_[i].push(ev.token);
          if (ev.logprob) choices_[i].logprobs.push_back(*ev.logprob);
          continue;
        }
        finished_[i] = true;
        ++finished_count_;
        if (ev.finish_reason == "error" || ev.finish_reason == "cancelled") {
          if (ev.finish_reason == "error")
            return fail(out, head, ApiError(500, "generation failed: " + ev.error, "", "server_error", "engine_error"));
          return fail(out, head, ApiError(503, "the request was cancelled (the server is stopping)", "",
                                          "server_error", "cancelled"));
        }
        texts_[i].finish(ev.text_limit);
        // With n > 1 choices, the prompt tokens every choice found cached.
        cached_tokens_ = finished_count_ == 1 ? ev.cached_tokens : std::min(cached_tokens_, ev.cached_tokens);
        // Completions carry the text as is; chat splits off a leading reasoning block.
        const ReasoningParts parts = ReasoningSplitter::split(
            texts_[i].sent(), parsed_.endpoint == Endpoint::Chat ? parsed_.reasoning : ReasoningMode::kOff,
            &choices_[i].has_reasoning);
        choices_[i].text = parts.content;
        choices_[i].reasoning = parts.reasoning;
        choices_[i].finish_reason = ev.finish_reason;
        if (parsed_.tool_parser) {
          tools::ToolOutput t = tools::parse_tool_output(*parsed_.tool_parser, parts.content, parsed_.parallel_tool_calls);
          choices_[i].text = std::move(t.content);
          for (auto& call : t.calls) choices_[i].tool_calls.push_back({tools::new_tool_call_id(ctx_.tool_family), std::move(call)});
          if (!choices_[i].tool_calls.empty() && ev.finish_reason == "stop") choices_[i].finish_reason = "tool_calls";
        }
        choices_[i].tokens = static_cast<int64_t>(texts_[i].tokens().size());
        if (parsed_.endpoint == Endpoint::Chat)
          choices_[i].reasoning_tokens = texts_[i].tokens_until(
              ReasoningSplitter::reasoning_end(texts_[i].sent(), parsed_.reasoning));
      }
    }
    if (finished_count_ < streams_.size()) return false;
    const ResponseHeader h = new_response_header(parsed_.endpoint, ctx_.model_name);
    head = HttpResponse{};
    out += to_text(full_response(h, choices_, parsed_.logprobs >= 0, ctx_.tokenizer,
                                 static_cast<int64_t>(parsed_.request.prompt.size()), cached_tokens_));
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
  bool fail(std::string& out, HttpResponse& head, const ApiError& e) {
    for (auto& s : streams_) s->cancel();
    head = error_response(e);
    out += head.body;
    head.body.clear();
    done_ = true;
    return true;
  }

  ParsedRequest parsed_;
  const ServingContext& ctx_;
  HttpStats& stats_;
  std::vector<std::shared_ptr<RequestStream>> streams_;
  std::vector<ChoiceText> texts_;
  std::vector<ChoiceResult> choices_;
  std::vector<bool> finished_;
  size_t finished_count_ = 0;
  int64_t cached_tokens_ = 0;
  bool done_ = false;
};

}  // namespace

std::shared_ptr<PendingResponse> whole_response(const ParsedRequest& p, const ServingContext& ctx,
                                                HttpStats& stats) {
  return std::make_shared<WholeResponse>(p, ctx, stats);
}

}  // namespace lockstep::server
