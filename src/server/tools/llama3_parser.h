// Llama 3.x JSON tool calls: the whole answer is the call, optionally after <|python_tag|>,
//   {"name": "get_weather", "parameters": {"city": "Paris"}}
// (several calls separated by ';' are accepted too). An answer that starts otherwise is text.
// The call is only known once the answer has ended, so a streamed call arrives with the end.
#pragma once

#include "server/tools/tool_call.h"

namespace lockstep::server::tools {

class Llama3Parser : public ToolCallParser {
 public:
  std::vector<ToolSegment> scan(std::string_view text, bool final) const override;
};

}  // namespace lockstep::server::tools
