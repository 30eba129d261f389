// Llama 3.x / Llama 4 tool calls: the whole answer is the call, optionally after <|python_tag|>
// (Llama 3.1) or between <|python_start|> and <|python_end|> (Llama 4), in either of the forms
// Meta's prompts teach:
//   {"name": "get_weather", "parameters": {"city": "Paris"}}     JSON (several separated by ';')
//   [get_weather(city="Paris"), ping()]                           pythonic (Llama 3.2, Llama 4)
// An answer that starts otherwise is text. The call is only known once the answer has ended, so
// a streamed call arrives with the end.
#pragma once

#include "server/tools/tool_call.h"

namespace lockstep::server::tools {

class Llama3Parser : public ToolCallParser {
 public:
  std::vector<ToolSegment> scan(std::string_view text, bool final) const override;
};

}  // namespace lockstep::server::tools
