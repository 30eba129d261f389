// Qwen3-Coder (and Qwen3.5) tool calls: XML-like blocks whose parameter values are raw text,
//   <tool_call>
//   <function=get_weather>
//   <parameter=city>
//   Paris
//   </parameter>
//   </function>
//   </tool_call>
// A value is converted to JSON by its parameter's schema: a "string" parameter keeps the text,
// any other parses the text as JSON (a value that is not JSON stays a string), as the template
// writes non-string values with tojson.
#pragma once

#include "server/tools/tool_call.h"

namespace lockstep::server::tools {

class QwenXmlParser : public ToolCallParser {
 public:
  explicit QwenXmlParser(ToolList tools) : tools_(std::move(tools)) {}
  std::vector<ToolSegment> scan(std::string_view text, bool final) const override;

  // One <function=...>...</function> body (the text inside the <tool_call> tags).
  std::optional<ToolCall> parse_function(std::string_view body) const;

 private:
  Json value_of(const std::string& function, const std::string& param, std::string_view text) const;
  ToolList tools_;
};

}  // namespace lockstep::server::tools
