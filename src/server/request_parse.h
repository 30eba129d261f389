// OpenAI request bodies -> engine requests. Every parameter is checked here, before anything is
// queued, so a bad request costs no engine time and its error names the field. The options built
// for a request are exactly those `lockstep generate` builds from the same flags (eos ids from
// config.json and the tokenizer, decode with special tokens skipped for stop strings), which
// is what makes a server response equal the CLI's text.
#pragma once

#include <string>

#include "scheduler/request_queue.h"
#include "server/json_fields.h"
#include "server/reasoning.h"
#include "server/serving_context.h"
#include "server/tools/tool_call.h"

namespace lockstep::server {

enum class Endpoint { Completion, Chat };

struct ParsedRequest {
  Endpoint endpoint = Endpoint::Completion;
  EngineRequest request;  // choice 0; choice i runs with seed + i
  int n = 1;
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  bool continuous_usage = false;  // stream_options.continuous_usage_stats (with include_usage)
  int logprobs = -1;            // -1: none; else alternatives per token (top_logprobs)
  ReasoningMode reasoning = ReasoningMode::kOff;  // chat: split <think>...</think> off the text
  // Chat with tools (tool_choice other than "none"): the content is parsed for calls.
  std::shared_ptr<const tools::ToolCallParser> tool_parser;
  bool parallel_tool_calls = true;
  std::vector<int32_t> shown_ids;  // special tokens kept in the text (the family's markers)
};

ParsedRequest parse_completion(const Body& body, const ServingContext& ctx);
ParsedRequest parse_chat(const Body& body, const ServingContext& ctx);

// The prompt text of a chat request: messages rendered with the model's template,
// add_generation_prompt = true, the config's special tokens and any chat_template_kwargs.
std::string render_chat_prompt(const Body& body, const ServingContext& ctx);

// 400 context_length_exceeded (naming `field`) for a text over ctx.max_prompt_bytes, before any
// time is spent tokenizing it.
void check_prompt_bytes(const std::string& text, const ServingContext& ctx, const char* field);

// 400 unless `model` is absent, "default" or the served model's name.
void check_model_name(const Body& body, const ServingContext& ctx);

}  // namespace lockstep::server
