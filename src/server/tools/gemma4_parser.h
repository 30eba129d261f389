// Gemma 4 tool calls: one call per block, arguments in the template's own notation,
//   <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3,units:[<|"|>C<|"|>]}<tool_call|>
// Strings are delimited by <|"|> (no escapes inside), keys are bare (or <|"|>-quoted), objects
// {k:v,...}, arrays [v,...], and numbers, true, false and null as in JSON. The arguments are
// converted to JSON text.
#pragma once

#include "server/tools/tool_call.h"

namespace lockstep::server::tools {

class Gemma4Parser : public ToolCallParser {
 public:
  std::vector<ToolSegment> scan(std::string_view text, bool final) const override;

  // The body between the block's markers: "call:NAME{...}".
  static std::optional<ToolCall> parse_call(std::string_view body);
};

}  // namespace lockstep::server::tools
