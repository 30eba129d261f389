#include "server/tools/hermes_parser.h"

#include "server/tools/call_text.h"

namespace lockstep::server::tools {

std::vector<ToolSegment> HermesParser::scan(std::string_view text, bool final) const {
  return scan_blocks(text, final, "<tool_call>", "</tool_call>",
                     [](std::string_view body) -> std::optional<std::vector<ToolCall>> {
                       auto j = parse_json(body);
                       if (!j) return std::nullopt;
                       auto call = call_from_object(*j, "arguments");
                       if (!call) return std::nullopt;
                       return std::vector<ToolCall>{std::move(*call)};
                     });
}

}  // namespace lockstep::server::tools
