// The tool fields of a chat request: `tools`, `tool_choice` and `parallel_tool_calls`, checked
// before anything is queued (400s naming the field), and the tool-call history in `messages`
// (assistant tool_calls, tool results) checked and shaped for the chat template.
#pragma once

#include <optional>
#include <string>

#include "server/json_fields.h"
#include "server/tools/tool_call.h"

namespace lockstep::server {

struct ToolRequest {
  enum class Choice { kAuto, kNone, kRequired, kNamed };
  tools::ToolList tools;
  Body declared = Body::array();  // `tools` as the client sent them (what the template renders)
  Choice choice = Choice::kAuto;
  std::string named;     // kNamed: the function's name
  bool parallel = true;  // parallel_tool_calls
};

// nullopt when the request offers no tools (and tool_choice is absent, "none" or "auto").
std::optional<ToolRequest> parse_tool_request(const Body& body);

// The history's tool messages checked: a "tool" message needs a string tool_call_id; an
// assistant's tool_calls are a list of {"id", "type": "function", "function": {"name",
// "arguments"}} with arguments a string of JSON (OpenAI's form). Returns the message as the
// templates expect it: arguments as the JSON object they hold (Qwen3, Llama 3.1, Mistral and
// Gemma templates index or tojson them), a null or missing content beside tool_calls as "",
// every other field unchanged.
Body template_message(const Body& message, size_t index);

}  // namespace lockstep::server
