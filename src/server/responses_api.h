// POST /v1/responses, stateless: a Responses request (input items, instructions, tools,
// tool_choice, text.format, max_output_tokens, ...) is translated into the chat request it
// means and run exactly as /v1/chat/completions runs it; its answer (whole, or the stream of
// chunks) is translated back into a Response object and the Responses streaming events. So a
// Responses answer has the chat answer's tokens, calls and guarantees. Nothing is stored:
// previous_response_id is refused, and a conversation is sent as input items.
#pragma once

#include <memory>

#include "server/http_message.h"
#include "server/http_stats.h"
#include "server/json_fields.h"
#include "server/serving_context.h"

namespace lockstep::server {

// The chat request a Responses request means. 400s name the Responses fields (input[2].call_id,
// tools[0].name, text.format, ...).
Body chat_request_of(const Body& responses_request);

// Handles a parsed /v1/responses body: a Reply whose pending response writes the Response
// object, or the event stream with "stream": true.
Reply responses_reply(const Body& body, const ServingContext& ctx, HttpStats& stats);

}  // namespace lockstep::server
