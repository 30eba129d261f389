#include "server/tool_request.h"

#include "server/api_error.h"
#include "server/tools/call_text.h"

namespace lockstep::server {

namespace {

// A name a client can dispatch on: OpenAI's rule, ^[a-zA-Z0-9_.-]{1,64}$.
bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (unsigned char c : n)
    if (!std::isalnum(c) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

const Body& member(const Body& obj, const char* key, const std::string& at, const char* what) {
  if (!has(obj, key)) bad_field(at + "." + key, std::string("required (") + what + ")", "missing_required_parameter");
  return obj.at(key);
}

tools::ToolSpec parse_tool(const Body& t, size_t i) {
  const std::string at = "tools[" + std::to_string(i) + "]";
  if (!t.is_object()) bad_field(at, "expected an object, got " + json_kind(t), "invalid_type");
  const Body& type = member(t, "type", at, "\"function\"");
  if (!type.is_string()) bad_field(at + ".type", "expected a string, got " + json_kind(type), "invalid_type");
  if (type != "function")
    bad_field(at + ".type", "unsupported tool type \"" + type.get<std::string>() + "\" (only \"function\")",
              "invalid_value");
  const Body& f = member(t, "function", at, "an object with name and parameters");
  const std::string fat = at + ".function";
  if (!f.is_object()) bad_field(fat, "expected an object, got " + json_kind(f), "invalid_type");
  const Body& name = member(f, "name", fat, "a string");
  if (!name.is_string()) bad_field(fat + ".name", "expected a string, got " + json_kind(name), "invalid_type");
  if (!valid_name(name.get<std::string>()))
    bad_field(fat + ".name", "\"" + name.get<std::string>() + "\" is not a function name (1 to 64 of a-z, A-Z, 0-9, _ . -)",
              "invalid_value");
  if (has(f, "description") && !f.at("description").is_string())
    bad_field(fat + ".description", "expected a string, got " + json_kind(f.at("description")), "invalid_type");
  if (has(f, "strict") && !f.at("strict").is_boolean())
    bad_field(fat + ".strict", "expected a boolean, got " + json_kind(f.at("strict")), "invalid_type");
  tools::ToolSpec spec{name.get<std::string>(), Body::object()};
  if (has(f, "parameters")) {
    const Body& p = f.at("parameters");
    if (!p.is_object())
      bad_field(fat + ".parameters", "expected a JSON Schema object, got " + json_kind(p), "invalid_type");
    spec.parameters = p;
  }
  return spec;
}

void parse_choice(const Body& body, ToolRequest& r) {
  if (!has(body, "tool_choice")) return;
  const Body& c = body.at("tool_choice");
  if (c.is_string()) {
    const std::string s = c.get<std::string>();
    if (s == "auto") r.choice = ToolRequest::Choice::kAuto;
    else if (s == "none") r.choice = ToolRequest::Choice::kNone;
    else if (s == "required") r.choice = ToolRequest::Choice::kRequired;
    else bad_field("tool_choice", "unknown value \"" + s + "\" (expected auto, none, required or "
                                  "{\"type\": \"function\", \"function\": {\"name\": ...}})", "invalid_value");
    return;
  }
  if (!c.is_object())
    bad_field("tool_choice", "expected a string or an object, got " + json_kind(c), "invalid_type");
  const Body& type = member(c, "type", "tool_choice", "\"function\"");
  if (type != "function")
    bad_field("tool_choice.type", "expected \"function\", got " + type.dump(), "invalid_value");
  const Body& f = member(c, "function", "tool_choice", "an object with the function's name");
  if (!f.is_object()) bad_field("tool_choice.function", "expected an object, got " + json_kind(f), "invalid_type");
  const Body& name = member(f, "name", "tool_choice.function", "a string");
  if (!name.is_string()) bad_field("tool_choice.function.name", "expected a string, got " + json_kind(name), "invalid_type");
  r.choice = ToolRequest::Choice::kNamed;
  r.named = name.get<std::string>();
}

}  // namespace

std::optional<ToolRequest> parse_tool_request(const Body& body) {
  ToolRequest r;
  if (auto p = get_bool(body, "parallel_tool_calls")) r.parallel = *p;
  parse_choice(body, r);
  if (!has(body, "tools")) {
    if (r.choice == ToolRequest::Choice::kRequired || r.choice == ToolRequest::Choice::kNamed)
      bad_field("tool_choice", "needs tools: the request offers none", "invalid_value");
    return std::nullopt;
  }
  const Body& list = body.at("tools");
  if (!list.is_array()) bad_field("tools", "expected an array, got " + json_kind(list), "invalid_type");
  if (list.empty()) bad_field("tools", "empty; omit the field to offer no tools", "invalid_value");
  for (size_t i = 0; i < list.size(); ++i) {
    tools::ToolSpec t = parse_tool(list[i], i);
    for (const auto& other : r.tools)
      if (other.name == t.name)
        bad_field("tools[" + std::to_string(i) + "].function.name", "\"" + t.name + "\" is offered twice",
                  "invalid_value");
    r.tools.push_back(std::move(t));
  }
  r.declared = list;
  if (r.choice == ToolRequest::Choice::kNamed) {
    bool found = false;
    for (const auto& t : r.tools) found = found || t.name == r.named;
    if (!found) bad_field("tool_choice.function.name", "\"" + r.named + "\" is not one of the tools", "invalid_value");
  }
  return r;
}

Body template_message(const Body& m, size_t i) {
  const std::string at = "messages[" + std::to_string(i) + "]";
  const std::string role = m.at("role").get<std::string>();
  if (role == "tool") {
    if (!has(m, "tool_call_id"))
      bad_field(at + ".tool_call_id", "required for a tool message (the id of the call it answers)",
                "missing_required_parameter");
    if (!m.at("tool_call_id").is_string())
      bad_field(at + ".tool_call_id", "expected a string, got " + json_kind(m.at("tool_call_id")), "invalid_type");
  }
  if (!has(m, "tool_calls")) return m;
  if (role != "assistant") bad_field(at + ".tool_calls", "only assistant messages carry tool_calls", "invalid_value");
  const Body& calls = m.at("tool_calls");
  if (!calls.is_array()) bad_field(at + ".tool_calls", "expected an array, got " + json_kind(calls), "invalid_type");
  Body out = m;
  // OpenAI clients send content null beside tool calls; templates written for transformers
  // test and slice content as a string (Qwen3's `'</think>' in message.content`), so it is "".
  if (!has(m, "content")) out["content"] = "";
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string cat = at + ".tool_calls[" + std::to_string(j) + "]";
    const Body& c = calls[j];
    if (!c.is_object()) bad_field(cat, "expected an object, got " + json_kind(c), "invalid_type");
    if (has(c, "id") && !c.at("id").is_string())
      bad_field(cat + ".id", "expected a string, got " + json_kind(c.at("id")), "invalid_type");
    if (has(c, "type") && c.at("type") != "function")
      bad_field(cat + ".type", "expected \"function\", got " + c.at("type").dump(), "invalid_value");
    const Body& f = member(c, "function", cat, "an object with name and arguments");
    if (!f.is_object()) bad_field(cat + ".function", "expected an object, got " + json_kind(f), "invalid_type");
    const Body& name = member(f, "name", cat + ".function", "a string");
    if (!name.is_string()) bad_field(cat + ".function.name", "expected a string, got " + json_kind(name), "invalid_type");
    const Body& args = member(f, "arguments", cat + ".function", "a string of JSON");
    if (!args.is_string())
      bad_field(cat + ".function.arguments", "expected a string of JSON (as OpenAI sends it), got " + json_kind(args),
                "invalid_type");
    auto parsed = tools::parse_json(args.get_ref<const std::string&>());
    if (!parsed || !parsed->is_object())
      bad_field(cat + ".function.arguments", "expected a JSON object in the string", "invalid_value");
    out["tool_calls"][j]["function"]["arguments"] = *parsed;
  }
  return out;
}

}  // namespace lockstep::server
