#include "server/tools/mistral_parser.h"

#include "server/tools/call_text.h"

namespace lockstep::server::tools {

namespace {

constexpr std::string_view kMarker = "[TOOL_CALLS]", kArgs = "[ARGS]", kCallId = "[CALL_ID]";
constexpr const char* kSpace = " \t\r\n";

// One payload after a marker, from `pos`: a JSON array of calls or NAME[ARGS]{...}. Advances pos.
bool parse_payload(std::string_view s, size_t& pos, std::vector<ToolCall>& calls) {
  pos = s.find_first_not_of(kSpace, pos);
  if (pos == std::string_view::npos) return false;
  if (s[pos] == '[') {
    const size_t end = json_container_end(s, pos);
    if (end == std::string_view::npos) return false;
    auto j = parse_json(s.substr(pos, end - pos));
    if (!j || !j->is_array() || j->empty()) return false;
    for (const auto& item : *j) {
      auto call = call_from_object(item, "arguments");
      if (!call) return false;
      calls.push_back(std::move(*call));
    }
    pos = end;
    return true;
  }
  const size_t args = s.find(kArgs, pos);
  if (args == std::string_view::npos) return false;
  std::string_view name = s.substr(pos, args - pos);
  if (const size_t id = name.find(kCallId); id != std::string_view::npos) name = name.substr(0, id);
  const size_t name_end = name.find_last_not_of(kSpace);
  if (name_end == std::string_view::npos) return false;
  name = name.substr(0, name_end + 1);
  if (name.find_first_of(kSpace) != std::string_view::npos) return false;
  const size_t obj = s.find_first_not_of(kSpace, args + kArgs.size());
  const size_t end = obj == std::string_view::npos ? obj : json_container_end(s, obj);
  if (end == std::string_view::npos || s[obj] != '{') return false;
  auto j = parse_json(s.substr(obj, end - obj));
  if (!j || !j->is_object()) return false;
  calls.push_back(ToolCall{std::string(name), j->dump()});
  pos = end;
  return true;
}

std::optional<std::vector<ToolCall>> parse_calls(std::string_view tail) {
  std::vector<ToolCall> calls;
  size_t pos = 0;
  while (true) {
    pos = tail.find_first_not_of(kSpace, pos);
    if (pos == std::string_view::npos) break;
    if (tail.substr(pos, kMarker.size()) != kMarker) return std::nullopt;
    pos += kMarker.size();
    if (!parse_payload(tail, pos, calls)) return std::nullopt;
  }
  return calls;
}

}  // namespace

std::vector<ToolSegment> MistralParser::scan(std::string_view text, bool final) const {
  std::vector<ToolSegment> out;
  const size_t b = text.find(kMarker);
  const size_t text_end = b != std::string_view::npos ? b : text.size() - (final ? 0 : partial_marker_tail(text, kMarker));
  if (text_end > 0) out.push_back(ToolSegment::of_text(std::string(text.substr(0, text_end))));
  if (b == std::string_view::npos || !final) return out;
  if (auto calls = parse_calls(text.substr(b)); calls && !calls->empty()) {
    for (auto& c : *calls) out.push_back(ToolSegment::of_call(std::move(c)));
  } else {
    out.push_back(ToolSegment::of_text(std::string(text.substr(b))));
  }
  return out;
}

}  // namespace lockstep::server::tools
