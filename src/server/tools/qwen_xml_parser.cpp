#include "server/tools/qwen_xml_parser.h"

#include "server/tools/call_text.h"

namespace lockstep::server::tools {

namespace {

constexpr const char* kSpace = " \t\r\n";

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

// True when the parameter's schema says the value is a string (type "string" or a list naming it).
bool string_typed(const Json& schema) {
  auto t = schema.find("type");
  if (t == schema.end()) return false;
  if (t->is_string()) return *t == "string";
  if (t->is_array())
    for (const auto& x : *t)
      if (x == "string") return true;
  return false;
}

}  // namespace

Json QwenXmlParser::value_of(const std::string& function, const std::string& param, std::string_view text) const {
  // The template writes "<parameter=k>\n" value "\n</parameter>": one newline each side is layout.
  if (text.starts_with('\n')) text.remove_prefix(1);
  if (text.ends_with('\n')) text.remove_suffix(1);
  for (const auto& t : tools_) {
    if (t.name != function) continue;
    auto props = t.parameters.find("properties");
    if (props != t.parameters.end() && props->is_object()) {
      auto p = props->find(param);
      if (p != props->end() && p->is_object() && string_typed(*p)) return std::string(text);
    }
  }
  auto j = parse_json(text);
  return j ? *j : Json(std::string(text));
}

std::optional<ToolCall> QwenXmlParser::parse_function(std::string_view body) const {
  body = trim(body);
  constexpr std::string_view kOpen = "<function=", kClose = "</function>";
  if (!body.starts_with(kOpen) || !body.ends_with(kClose)) return std::nullopt;
  const size_t name_end = body.find('>');
  if (name_end == std::string_view::npos) return std::nullopt;
  const std::string name(trim(body.substr(kOpen.size(), name_end - kOpen.size())));
  if (name.empty()) return std::nullopt;
  std::string_view rest = body.substr(name_end + 1, body.size() - kClose.size() - name_end - 1);
  Json args = Json::object();
  constexpr std::string_view kParam = "<parameter=", kParamEnd = "</parameter>";
  for (;;) {
    rest = trim(rest);
    if (rest.empty()) break;
    if (!rest.starts_with(kParam)) return std::nullopt;  // stray text inside the function
    const size_t key_end = rest.find('>');
    if (key_end == std::string_view::npos) return std::nullopt;
    const std::string key(trim(rest.substr(kParam.size(), key_end - kParam.size())));
    const size_t value_end = rest.find(kParamEnd, key_end + 1);
    if (key.empty() || value_end == std::string_view::npos) return std::nullopt;
    args[key] = value_of(name, key, rest.substr(key_end + 1, value_end - key_end - 1));
    rest = rest.substr(value_end + kParamEnd.size());
  }
  return ToolCall{name, args.dump()};
}

std::vector<ToolSegment> QwenXmlParser::scan(std::string_view text, bool final) const {
  return scan_blocks(text, final, "<tool_call>", "</tool_call>",
                     [this](std::string_view body) -> std::optional<std::vector<ToolCall>> {
                       auto call = parse_function(body);
                       if (!call) return std::nullopt;
                       return std::vector<ToolCall>{std::move(*call)};
                     });
}

}  // namespace lockstep::server::tools
