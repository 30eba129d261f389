// Which tool-call syntax a served model writes, decided from its chat template (the template
// is what teaches the model the syntax, by rendering the tools and past calls):
//   contains "<|tool_call>"                  -> Gemma 4
//   contains "[TOOL_CALLS]"                  -> Mistral; the [ARGS] form when it contains "[ARGS]"
//   contains "<function=" (and <tool_call>)  -> Qwen3-Coder / Qwen3.5 XML
//   contains "<tool_call>"                   -> Qwen3 / Hermes JSON
//   contains "<|python_tag|>", "<|start_header_id|>" or "<|header_start|>"
//                                            -> Llama 3.x / Llama 4, JSON or pythonic
//   anything else                            -> Qwen3 / Hermes JSON
// The first rule that matches wins (Qwen3-Coder's template also contains "<tool_call>").
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/tools/tool_call.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::server::tools {

enum class ToolFamily { kHermes, kQwenXml, kLlama3, kMistralJson, kMistralArgs, kGemma4 };

ToolFamily tool_family(std::string_view chat_template);
const char* family_name(ToolFamily family);

std::shared_ptr<const ToolCallParser> make_tool_parser(ToolFamily family, ToolList tools);

// The marker strings of the family's syntax. Where the tokenizer holds one as a special token
// (Mistral's [TOOL_CALLS], Llama's <|python_tag|>, Gemma 4's <|tool_call>), the answer's text
// must show it for the parser to see the call (ChoiceText keeps these tokens).
std::vector<std::string> family_markers(ToolFamily family);
// The ids of the family's markers that the tokenizer holds as special tokens.
std::vector<int32_t> special_marker_ids(ToolFamily family, const Tokenizer& tokenizer);

// A fresh id for a call: "call_" and 24 hex digits; Mistral's templates require exactly nine
// alphanumerics, so Mistral families get those.
std::string new_tool_call_id(ToolFamily family);

}  // namespace lockstep::server::tools
