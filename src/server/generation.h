// Running a parsed generation request on the engine and answering it over HTTP: the whole
// response as one JSON body once every choice has finished, or a stream of SSE chunks made as the
// engine emits tokens. Neither holds a thread while it waits: the engine's events wake the
// connection, which polls the response (src/server/http_message.h).
#pragma once

#include <memory>
#include <vector>

#include "server/http_message.h"
#include "server/http_stats.h"
#include "server/request_parse.h"
#include "server/serving_context.h"

namespace lockstep::server {

// Submits the request's n choices (choice i with seed + i), all or none. Queue full -> 503 with
// Retry-After; shutting down -> 503; a request the engine refuses -> 400 naming the field.
std::vector<std::shared_ptr<RequestStream>> submit_choices(const ParsedRequest& p, Engine& engine);

// The JSON response, complete when every choice has finished. Abandoning it (the client left)
// cancels the choices.
std::shared_ptr<PendingResponse> whole_response(const ParsedRequest& p, const ServingContext& ctx,
                                                HttpStats& stats);

// A text/event-stream response (its head is `stream_head()`); a client that disconnects cancels
// its sequences (the engine frees their memory at its next step).
std::shared_ptr<PendingResponse> stream_response(const ParsedRequest& p, const ServingContext& ctx,
                                                 HttpStats& stats);
HttpResponse stream_head();

}  // namespace lockstep::server
