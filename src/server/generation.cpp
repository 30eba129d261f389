#include "server/generation.h"

#include "core/error.h"
#include "server/api_error.h"
#include "server/choice_text.h"
#include "server/response_format.h"

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

void respond_whole(const ParsedRequest& p, const ServingContext& ctx, httplib::Response& res) {
  auto streams = submit_choices(p, *ctx.engine);
  std::vector<ChoiceResult> choices(streams.size());
  try {
    for (size_t i = 0; i < streams.size(); ++i) {
      ChoiceText text(ctx.tokenizer, p.request.options.stop);
      for (;;) {
        StreamEvent ev;
        if (!streams[i]->next(ev, std::chrono::milliseconds(1000))) continue;
        if (ev.kind == StreamEvent::Kind::Token) {
          text.push(ev.token);
          if (ev.logprob) choices[i].logprobs.push_back(*ev.logprob);
          continue;
        }
        if (ev.finish_reason == "error")
          throw ApiError(500, "generation failed: " + ev.error, "", "server_error", "engine_error");
        if (ev.finish_reason == "cancelled")
          throw ApiError(503, "the request was cancelled (the server is stopping)", "",
                         "server_error", "cancelled");
        text.finish(ev.text_limit);
        choices[i].text = text.sent();
        choices[i].finish_reason = ev.finish_reason;
        choices[i].tokens = static_cast<int64_t>(text.tokens().size());
        break;
      }
    }
  } catch (...) {
    for (auto& s : streams) s->cancel();
    throw;
  }
  const ResponseHeader h = new_response_header(p.endpoint, ctx.model_name);
  res.set_content(to_text(full_response(h, choices, p.logprobs >= 0, ctx.tokenizer,
                                        static_cast<int64_t>(p.request.prompt.size()))),
                  "application/json");
}

}  // namespace lockstep::server
