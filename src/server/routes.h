// The HTTP endpoints: which path runs what, auth in front of them, and one place that turns
// every failure into an OpenAI-style JSON error. Independent of the transport (http_session.cpp).
#pragma once

#include <atomic>
#include <optional>

#include "server/http_message.h"
#include "server/http_stats.h"
#include "server/serving_context.h"

namespace lockstep::server {

class Routes {
 public:
  // `draining` turns /health into 503 while SIGTERM finishes in-flight requests.
  Routes(const ServingContext& ctx, HttpStats& stats, const std::atomic<bool>& draining);

  // Before the body is read: a missing or wrong API key (401), an unknown path (404) or a wrong
  // method (405) is answered from the head alone, and the body is never read.
  std::optional<HttpResponse> check_head(const HttpRequest& head) const;

  // The whole request (it passed check_head). Runs on a worker thread: parsing, rendering and
  // tokenizing happen here. Never throws: every failure is a JSON error reply.
  Reply handle(const HttpRequest& req) const;

 private:
  Reply dispatch(const HttpRequest& req) const;

  const ServingContext& ctx_;
  HttpStats& stats_;
  const std::atomic<bool>& draining_;
  int64_t started_;  // `created` of the model card
};

}  // namespace lockstep::server
