#include "server/tools/call_text.h"

#include <algorithm>

namespace lockstep::server::tools {

size_t partial_marker_tail(std::string_view text, std::string_view marker) {
  for (size_t k = std::min(marker.size() - 1, text.size()); k > 0; --k)
    if (text.substr(text.size() - k) == marker.substr(0, k)) return k;
  return 0;
}

size_t json_container_end(std::string_view text, size_t from) {
  if (from >= text.size() || (text[from] != '{' && text[from] != '[')) return std::string_view::npos;
  std::vector<char> open;
  bool in_string = false, escaped = false;
  for (size_t i = from; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      open.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (open.empty() || open.back() != c) return std::string_view::npos;  // mismatched
      open.pop_back();
      if (open.empty()) return i + 1;
    }
  }
  return std::string_view::npos;
}

namespace {

// Deeper nesting than any tool schema needs; copying or dumping a value recurses per level, so
// text from a client or a model must not nest without bound.
constexpr int kMaxDepth = 64;

bool too_deep(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxDepth) return true;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return false;
}

}  // namespace

std::optional<Json> parse_json(std::string_view text) {
  if (too_deep(text)) return std::nullopt;
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::optional<ToolCall> call_from_object(const Json& j, const char* args_key) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return std::nullopt;
  ToolCall call{name->get<std::string>(), "{}"};
  auto args = j.find(args_key);
  if (args == j.end() || args->is_null()) return call;
  if (args->is_string()) {  // some models write the arguments as a JSON string
    auto inner = parse_json(args->get_ref<const std::string&>());
    if (!inner || !inner->is_object()) return std::nullopt;
    call.arguments = inner->dump();
    return call;
  }
  if (!args->is_object()) return std::nullopt;
  call.arguments = args->dump();
  return call;
}

std::vector<ToolSegment> scan_blocks(std::string_view text, bool final, std::string_view begin,
                                     std::string_view end, const BlockBodyParser& body) {
  std::vector<ToolSegment> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t b = text.find(begin, pos);
    if (b == std::string_view::npos) {
      // Text to the end, less a tail that may still grow into `begin`.
      const size_t keep = final ? 0 : partial_marker_tail(text.substr(pos), begin);
      if (text.size() - keep > pos) out.push_back(ToolSegment::of_text(std::string(text.substr(pos, text.size() - keep - pos))));
      break;
    }
    if (b > pos) out.push_back(ToolSegment::of_text(std::string(text.substr(pos, b - pos))));
    const size_t inner = b + begin.size();
    const size_t e = text.find(end, inner);
    if (e == std::string_view::npos) {
      // An open block: undecided while streaming, text when the answer ended inside it.
      if (final) out.push_back(ToolSegment::of_text(std::string(text.substr(b))));
      break;
    }
    const size_t after = e + end.size();
    auto calls = body(text.substr(inner, e - inner));
    if (calls && !calls->empty()) {
      for (auto& c : *calls) out.push_back(ToolSegment::of_call(std::move(c)));
    } else {
      out.push_back(ToolSegment::of_text(std::string(text.substr(b, after - b))));
    }
    pos = after;
  }
  return out;
}

}  // namespace lockstep::server::tools
