// The HTTP endpoints: which path runs what, auth in front of them, and one place that turns
// every failure into an OpenAI-style JSON error.
#pragma once

#include <httplib.h>

#include <atomic>

#include "server/http_stats.h"
#include "server/serving_context.h"

namespace lockstep::server {

// `draining` turns /health into 503 while SIGTERM finishes in-flight requests.
void register_routes(httplib::Server& http, const ServingContext& ctx, HttpStats& stats,
                     const std::atomic<bool>& draining);

}  // namespace lockstep::server
