// Mistral tool calls after the [TOOL_CALLS] marker, in either of the forms Mistral's templates
// use:
//   [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, ...]   (v3 templates)
//   [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]...               (v11 and later)
// Text before the first marker is content; everything after it must be calls, else the whole
// tail is text. The calls are known once the answer has ended.
#pragma once

#include "server/tools/tool_call.h"

namespace lockstep::server::tools {

class MistralParser : public ToolCallParser {
 public:
  std::vector<ToolSegment> scan(std::string_view text, bool final) const override;
};

}  // namespace lockstep::server::tools
