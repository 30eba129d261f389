#include "chat/chat_template.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "chat/builtins.h"
#include "chat/eval.h"
#include "chat/lexer.h"
#include "chat/parser.h"
#include "core/error.h"

namespace lockstep::chat {

namespace {

constexpr int64_t kMaxRange = 100000;  // Jinja2's sandbox limit on range()

Value range(const Args& a) {
  if (a.positional.empty() || a.positional.size() > 3) fail("range expected 1 to 3 arguments");
  int64_t start = 0, stop, step = 1;
  if (a.positional.size() == 1) {
    stop = want_int(a.positional[0], "range stop");
  } else {
    start = want_int(a.positional[0], "range start");
    stop = want_int(a.positional[1], "range stop");
    if (a.positional.size() == 3) step = want_int(a.positional[2], "range step");
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  std::vector<Value> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (int64_t(out.size()) >= kMaxRange) fail("range too big, maximum size for range is ", kMaxRange);
    out.emplace_back(i);
  }
  return Value::list(std::move(out));
}

// namespace(...) and dict(...): mappings from positional dicts and keyword arguments.
Value mapping(const Args& a, bool is_namespace) {
  auto d = std::make_shared<Dict>();
  d->is_namespace = is_namespace;
  for (const Value& v : a.positional) {
    if (!v.is_mapping()) fail(is_namespace ? "namespace" : "dict", "() positional arguments must be mappings");
    for (const auto& kv : v.dict().items) d->set(kv.first, kv.second);
  }
  for (const auto& [k, v] : a.keywords) d->set(Value(k), v);
  return Value(std::move(d));
}

// The fixed time from options["strftime_now"], or now.
std::tm clock_time(const nlohmann::ordered_json& options) {
  std::tm tm{};
  const auto it = options.find("strftime_now");
  if (it == options.end()) {
    const std::time_t now = std::time(nullptr);
    localtime_r(&now, &tm);
    return tm;
  }
  if (!it->is_string()) fail("option strftime_now must be a date string like \"2024-07-26\"");
  const std::string s = it->get<std::string>();
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  const int n = std::sscanf(s.c_str(), "%d-%d-%d%*c%d:%d:%d", &y, &mo, &d, &h, &mi, &sec);
  if (n != 3 && n != 6) fail("option strftime_now: expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS, got \"", s, "\"");
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  const std::time_t t = timegm(&tm);  // normalises and fills in the weekday and day of year
  gmtime_r(&t, &tm);
  return tm;
}

ScopePtr globals(const std::tm& now) {
  auto g = std::make_shared<Scope>();
  g->vars["range"] = Value::function("range", range);
  g->vars["namespace"] = Value::function("namespace", [](const Args& a) { return mapping(a, true); });
  g->vars["dict"] = Value::function("dict", [](const Args& a) { return mapping(a, false); });
  g->vars["raise_exception"] = Value::function("raise_exception", [](const Args& a) -> Value {
    const Value* m = a.get(0, "message");
    fail("raise_exception: ", m ? m->to_str() : std::string());
  });
  g->vars["strftime_now"] = Value::function("strftime_now", [now](const Args& a) {
    const Value* f = a.get(0, "format");
    if (!f) fail("strftime_now() needs a format");
    char buf[512];
    const size_t n = std::strftime(buf, sizeof buf, want_string(*f, "format").c_str(), &now);
    return Value(std::string(buf, n));
  });
  return g;
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source) {
  Parser p(lex(source));
  body_ = std::make_shared<const Body>(p.parse_template());
}

ChatTemplate::~ChatTemplate() = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& options) const {
  if (!options.is_object() && !options.is_null()) fail("chat template options must be a JSON object");
  auto scope = std::make_shared<Scope>();
  scope->parent = globals(clock_time(options.is_null() ? nlohmann::ordered_json::object() : options));
  // transformers always passes these three.
  scope->vars["add_generation_prompt"] = Value(false);
  scope->vars["tools"] = Value::none();
  scope->vars["documents"] = Value::none();
  if (options.is_object()) {
    for (auto it = options.begin(); it != options.end(); ++it)
      if (it.key() != "strftime_now") scope->vars[it.key()] = from_json(it.value());
  }
  scope->vars["messages"] = from_json(messages);
  Evaluator ev;
  return ev.render(*body_, scope);
}

std::string ChatTemplate::render(const nlohmann::json& messages, const nlohmann::json& options) const {
  return render(nlohmann::ordered_json(messages), nlohmann::ordered_json(options));
}

std::string template_from_config(const nlohmann::json& config, const std::string& name) {
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) fail("tokenizer config has no chat_template");
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == name && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"].get<std::string>();
    }
    fail("tokenizer config has no chat_template named '", name, "'");
  }
  fail("tokenizer config chat_template must be a string or a list of {name, template}");
}

nlohmann::ordered_json special_tokens_from_config(const nlohmann::json& config) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    const auto it = config.find(key);
    if (it == config.end()) continue;
    if (it->is_string()) out[key] = it->get<std::string>();
    else if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
      out[key] = (*it)["content"].get<std::string>();
  }
  return out;
}

}  // namespace lockstep::chat

namespace lockstep {

std::string render_chat(const std::string& template_source, const nlohmann::json& messages,
                        const nlohmann::json& options) {
  return chat::ChatTemplate(template_source).render(messages, options);
}

std::string render_chat(const std::string& template_source, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& options) {
  return chat::ChatTemplate(template_source).render(messages, options);
}

}  // namespace lockstep
