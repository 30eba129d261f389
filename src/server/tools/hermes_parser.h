// Qwen3 / Qwen2.5 / Hermes tool calls: a JSON object per call between tags,
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
// with any text around the blocks.
#pragma once

#include "server/tools/tool_call.h"

namespace lockstep::server::tools {

class HermesParser : public ToolCallParser {
 public:
  std::vector<ToolSegment> scan(std::string_view text, bool final) const override;
};

}  // namespace lockstep::server::tools
