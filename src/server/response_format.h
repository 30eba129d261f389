// OpenAI response shapes: whole responses, streaming chunks (SSE), usage and logprobs, for
// /v1/completions ("text_completion") and /v1/chat/completions ("chat.completion").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "scheduler/request_queue.h"
#include "server/request_parse.h"
#include "server/tools/tool_call.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::server {

// Fields every response and chunk of one request shares.
struct ResponseHeader {
  std::string id;        // cmpl-... / chatcmpl-...
  int64_t created = 0;   // Unix seconds
  std::string model;
  Endpoint endpoint = Endpoint::Completion;
};

ResponseHeader new_response_header(Endpoint endpoint, const std::string& model);

// A parsed tool call with the id the response gives it.
struct IdentifiedCall {
  std::string id;
  tools::ToolCall call;
};

struct ChoiceResult {
  std::string text;       // chat: the content, after any reasoning block
  std::string reasoning;  // chat: the reasoning block's text (ReasoningSplitter)
  bool has_reasoning = false;  // message.reasoning_content is sent
  std::string finish_reason;
  std::vector<TokenLogprob> logprobs;
  int64_t tokens = 0;
  int64_t reasoning_tokens = 0;  // of `tokens`, those of the reasoning block
  std::vector<IdentifiedCall> tool_calls;  // chat with tools: message.tool_calls (content null when empty)
};

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"},
//  "completion_tokens_details": {"reasoning_tokens"}}.
nlohmann::ordered_json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens,
                                  int64_t reasoning_tokens);

// Logprobs of `lps` in the endpoint's format (completions: tokens / token_logprobs /
// top_logprobs / text_offset starting at `text_offset`; chat: {"content": [...]}).
nlohmann::ordered_json logprobs_json(Endpoint endpoint, const Tokenizer* tokenizer,
                             std::span<const TokenLogprob> lps, size_t text_offset);

nlohmann::ordered_json full_response(const ResponseHeader& h, const std::vector<ChoiceResult>& choices,
                             bool with_logprobs, const Tokenizer* tokenizer,
                             int64_t prompt_tokens, int64_t cached_tokens);

// One streaming chunk for choice `index`: text (or chat delta content; `reasoning`, when not
// empty, as delta.reasoning_content), an optional finish
// reason ("" for none), logprobs (null when not requested), and "usage": null when the client
// asked for usage (OpenAI sends it on every chunk then, set only on the last).
nlohmann::ordered_json stream_chunk(const ResponseHeader& h, int index, const std::string& text,
                            const std::string& reasoning, bool first, const std::string& finish_reason,
                            nlohmann::ordered_json logprobs, bool include_usage);
// The chunks that stream one call of choice `index` as OpenAI does: the first names it
// (tool_calls[{index, id, type, function: {name, arguments: ""}}]), the second carries
// function.arguments; `call_index` is the call's place among the choice's calls.
std::vector<nlohmann::ordered_json> tool_call_chunks(const ResponseHeader& h, int index, int call_index,
                                                     const IdentifiedCall& call, bool include_usage);
// The final usage chunk: "choices": [].
nlohmann::ordered_json usage_chunk(const ResponseHeader& h, int64_t prompt_tokens, int64_t completion_tokens,
                                   int64_t cached_tokens, int64_t reasoning_tokens);

// JSON text; invalid UTF-8 (a token that is half a character) becomes U+FFFD.
std::string to_text(const nlohmann::ordered_json& j);
// "data: <json>\n\n"
std::string sse_event(const nlohmann::ordered_json& j);

}  // namespace lockstep::server
