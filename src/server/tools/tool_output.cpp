#include "server/tools/tool_call.h"

namespace lockstep::server::tools {

namespace {

constexpr const char* kSpace = " \t\r\n";

}  // namespace

ToolOutput assemble_tool_output(const std::vector<ToolSegment>& segments, bool parallel) {
  ToolOutput out;
  bool any_call = false, text_seen = false, call_first = false;
  for (const ToolSegment& s : segments) {
    if (s.kind == ToolSegment::Kind::kCall) {
      if (!text_seen) call_first = true;
      any_call = true;
      if (parallel || out.calls.empty()) out.calls.push_back(s.call);
      continue;
    }
    out.content += s.text;
    if (s.text.find_first_not_of(kSpace) != std::string::npos) text_seen = true;
  }
  if (!any_call) return out;  // plain text stays exactly the model's text
  // The newlines a model writes around its calls are layout, not an answer: trailing whitespace
  // goes, and leading whitespace when a call came before any text.
  const size_t e = out.content.find_last_not_of(kSpace);
  out.content.resize(e == std::string::npos ? 0 : e + 1);
  if (call_first) out.content.erase(0, out.content.find_first_not_of(kSpace));
  return out;
}

ToolOutput parse_tool_output(const ToolCallParser& parser, std::string_view text, bool parallel) {
  return assemble_tool_output(parser.scan(text, true), parallel);
}

}  // namespace lockstep::server::tools
