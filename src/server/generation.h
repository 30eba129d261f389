// Running a parsed generation request on the engine and answering it over HTTP: the whole
// response as one JSON body, or a stream of SSE chunks written as the engine emits tokens.
#pragma once

#include <httplib.h>

#include <memory>
#include <vector>

#include "server/http_stats.h"
#include "server/request_parse.h"
#include "server/serving_context.h"

namespace lockstep::server {

// Submits the request's n choices (choice i with seed + i). Queue full -> 503 with Retry-After;
// shutting down -> 503; a request the engine refuses -> 400 naming the field. Nothing stays
// queued when it throws.
std::vector<std::shared_ptr<RequestStream>> submit_choices(const ParsedRequest& p, Engine& engine);

// Waits for every choice and writes the JSON response.
void respond_whole(const ParsedRequest& p, const ServingContext& ctx, httplib::Response& res);

// Sets a chunked text/event-stream provider on `res`; a client that disconnects cancels its
// sequences (the engine frees their memory at its next step).
void respond_stream(const ParsedRequest& p, const ServingContext& ctx, HttpStats& stats,
                    httplib::Response& res);

}  // namespace lockstep::server
