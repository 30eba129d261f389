// Attribute, item and slice access, and the Python methods of str, dict and list that templates
// call (`message.content.startswith(...)`, `tool.get('x')`, `d.items()`). As in transformers'
// ImmutableSandboxedEnvironment, methods that would mutate a list or dict are refused.
#include <algorithm>

#include "chat/builtins.h"
#include "chat/text.h"
#include "core/error.h"

namespace lockstep::chat {

const std::string& want_string(const Value& v, const char* what) {
  if (!v.is_string()) fail(what, " must be a string, not '", v.type_name(), "'");
  return v.str();
}

int64_t want_int(const Value& v, const char* what) {
  if (!v.is_int() && !v.is_bool()) fail(what, " must be an integer, not '", v.type_name(), "'");
  return v.integer();
}

namespace {

const Value* opt(const Args& a, size_t i, const char* name) {
  const Value* v = a.get(i, name);
  return v && !v->is_none() ? v : nullptr;
}

Value strings(const std::vector<std::string>& parts) {
  std::vector<Value> out(parts.begin(), parts.end());
  return Value::list(std::move(out));
}

// Python's startswith/endswith: a string or a tuple of strings.
bool affix(const std::string& s, const Value& which, bool prefix) {
  auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (which.is_list()) {
    for (const Value& v : which.list().items)
      if (one(want_string(v, "startswith/endswith argument"))) return true;
    return false;
  }
  return one(want_string(which, "startswith/endswith argument"));
}

// Code point index of a byte offset (str.find returns code point positions).
int64_t cp_index(const std::string& s, size_t byte) {
  return byte == std::string::npos ? -1 : int64_t(text::code_point_count(std::string_view(s).substr(0, byte)));
}

bool all_cps(const std::string& s, bool (*pred)(uint32_t)) {
  if (s.empty()) return false;
  for (uint32_t cp : text::decode(s))
    if (!pred(cp)) return false;
  return true;
}

Value string_method(const std::string& s, const std::string& name, const Args& a) {
  if (name == "startswith" || name == "endswith") {
    const Value* p = a.get(0, "prefix");
    if (!p) fail(name, "() takes at least 1 argument");
    return Value(affix(s, *p, name == "startswith"));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value* c = opt(a, 0, "chars");
    const std::string* chars = c ? &want_string(*c, "strip characters") : nullptr;
    return Value(text::strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const Value* sep = opt(a, 0, "sep");
    const Value* max = a.get(1, "maxsplit");
    const std::string* sp = sep ? &want_string(*sep, "separator") : nullptr;
    if (sp && sp->empty()) fail("empty separator");
    const int64_t n = max ? want_int(*max, "maxsplit") : -1;
    return strings(name == "split" ? text::split(s, sp, n) : text::rsplit(s, sp, n));
  }
  if (name == "replace") {
    const Value* from = a.get(0, "old");
    const Value* to = a.get(1, "new");
    if (!from || !to) fail("replace() takes at least 2 arguments");
    const Value* count = a.get(2, "count");
    return Value(text::replace(s, want_string(*from, "old"), want_string(*to, "new"),
                               count ? want_int(*count, "count") : -1));
  }
  if (name == "upper") return Value(text::upper(s));
  if (name == "lower") return Value(text::lower(s));
  if (name == "title") return Value(text::title(s));
  if (name == "capitalize") return Value(text::capitalize(s));
  if (name == "splitlines") return strings(text::split_lines(s));
  if (name == "find" || name == "rfind" || name == "count" || name == "index") {
    const Value* sub = a.get(0, "sub");
    if (!sub) fail(name, "() takes at least 1 argument");
    const std::string& t = want_string(*sub, "substring");
    if (name == "count") {
      if (t.empty()) return Value(int64_t(text::code_point_count(s)) + 1);
      int64_t n = 0;
      for (size_t p = s.find(t); p != std::string::npos; p = s.find(t, p + t.size())) ++n;
      return Value(n);
    }
    const int64_t at = cp_index(s, name == "rfind" ? s.rfind(t) : s.find(t));
    if (name == "index" && at < 0) fail("substring not found");
    return Value(at);
  }
  if (name == "join") {
    const Value* it = a.get(0, "iterable");
    if (!it) fail("join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const Value& v : iterate(*it)) {
      if (!first) out += s;
      out += want_string(v, "join item");
      first = false;
    }
    return Value(out);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const Value* p = a.get(0, "affix");
    if (!p) fail(name, "() takes exactly one argument");
    const std::string& x = want_string(*p, "affix");
    if (!affix(s, *p, name == "removeprefix")) return Value(s);
    return Value(name == "removeprefix" ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
  }
  if (name == "isspace") return Value(all_cps(s, text::is_space));
  if (name == "isdigit") return Value(all_cps(s, [](uint32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha")
    return Value(all_cps(s, [](uint32_t c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }));
  if (name == "isupper") return Value(text::lower(s) != s && text::upper(s) == s);
  if (name == "islower") return Value(text::upper(s) != s && text::lower(s) == s);
  fail("'str' object has no attribute '", name, "'");
}

Value dict_method(const Value& d, const std::string& name, const Args& a) {
  const Dict& dict = d.dict();
  if (name == "items") {
    std::vector<Value> out;
    for (const auto& [k, v] : dict.items) out.push_back(Value::list({k, v}, true));
    return Value::list(std::move(out));
  }
  if (name == "keys" || name == "values") {
    std::vector<Value> out;
    for (const auto& [k, v] : dict.items) out.push_back(name == "keys" ? k : v);
    return Value::list(std::move(out));
  }
  // get
  const Value* key = a.get(0, "key");
  if (!key) fail("get() takes at least 1 argument");
  if (const Value* v = dict.find(*key)) return *v;
  const Value* def = a.get(1, "default");
  return def ? *def : Value::none();
}

Value list_method(const Value& l, const std::string& name, const Args& a) {
  const Value* x = a.get(0, "value");
  if (!x) fail(name, "() takes exactly one argument");
  const auto& items = l.list().items;
  int64_t count = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!equals(items[i], *x)) continue;
    if (name == "index") return Value(int64_t(i));
    ++count;
  }
  if (name == "index") fail(x->repr(), " is not in list");
  return Value(count);
}

bool is_method(const Value& obj, const std::string& name) {
  static const char* kStr[] = {"startswith", "endswith", "strip", "lstrip", "rstrip", "split",
                               "rsplit", "replace", "upper", "lower", "title", "capitalize",
                               "splitlines", "find", "rfind", "count", "index", "join",
                               "removeprefix", "removesuffix", "isspace", "isdigit", "isalpha",
                               "isupper", "islower"};
  if (obj.is_string()) return std::find(std::begin(kStr), std::end(kStr), name) != std::end(kStr);
  if (obj.is_mapping()) return name == "items" || name == "keys" || name == "values" || name == "get";
  if (obj.is_list()) return name == "index" || name == "count";
  return false;
}

bool is_mutator(const Value& obj, const std::string& name) {
  static const char* kList[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
  static const char* kDict[] = {"pop", "popitem", "clear", "update", "setdefault"};
  if (obj.is_list()) return std::find(std::begin(kList), std::end(kList), name) != std::end(kList);
  if (obj.is_mapping()) return std::find(std::begin(kDict), std::end(kDict), name) != std::end(kDict);
  return false;
}

Value bound(const Value& obj, const std::string& name) {
  return Value::function(obj.type_name() + "." + name, [obj, name](const Args& a) {
    if (obj.is_string()) return string_method(obj.str(), name, a);
    if (obj.is_mapping()) return dict_method(obj, name, a);
    return list_method(obj, name, a);
  });
}

std::string describe(const Value& obj) {
  return obj.is_mapping() ? "dict object" : obj.is_none() ? "None" : obj.type_name() + " object";
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail(obj.undefined_hint());
  if (is_method(obj, name)) return bound(obj, name);
  if (is_mutator(obj, name)) {
    // Transformers renders in an immutable sandbox: the lookup succeeds, the call is refused.
    const std::string what = obj.type_name();
    return Value::function(what + "." + name, [what, name](const Args&) -> Value {
      fail("access to attribute '", name, "' of '", what, "' object is unsafe");
    });
  }
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find_key(name)) return *v;
  }
  std::string hint = "'";  // built with += : GCC 12 misreports "'" + std::string&& (-Wrestrict)
  hint += describe(obj);
  hint += "' has no attribute '";
  hint += name;
  hint += "'";
  return Value::undefined(hint);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail(obj.undefined_hint());
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    const bool str = obj.is_string();
    const std::vector<size_t> at = str ? text::code_point_offsets(obj.str()) : std::vector<size_t>{};
    const int64_t n = str ? int64_t(at.size()) - 1 : int64_t(obj.list().items.size());
    int64_t i = key.integer();
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      if (!str) return obj.list().items[size_t(i)];
      return Value(obj.str().substr(at[size_t(i)], at[size_t(i) + 1] - at[size_t(i)]));
    }
    return Value::undefined(std::string(str ? "string" : "list") + " index out of range");
  }
  if (key.is_string()) return get_attr(obj, key.str());
  std::string hint = "'";
  hint += describe(obj);
  hint += "' has no item ";
  hint += key.repr();
  return Value::undefined(hint);
}

Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  if (obj.is_undefined()) fail(obj.undefined_hint());
  // Jinja2 compiles a slice to a plain Python subscript, so slicing anything else is an error.
  if (!obj.is_list() && !obj.is_string()) fail("'", obj.type_name(), "' object is not subscriptable");
  const bool str = obj.is_string();
  const std::vector<size_t> at = str ? text::code_point_offsets(obj.str()) : std::vector<size_t>{};
  const int64_t n = str ? int64_t(at.size()) - 1 : int64_t(obj.list().items.size());
  auto get = [](const Value* v) -> const Value* { return v && !v->is_none() ? v : nullptr; };
  const int64_t st = get(step) ? want_int(*step, "slice step") : 1;
  if (st == 0) fail("slice step cannot be zero");
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](const Value* v, int64_t def) {
    if (!get(v)) return def;
    int64_t i = want_int(*v, "slice index");
    if (i < 0) i = std::max<int64_t>(i + n, st < 0 ? -1 : 0);
    else if (i > n) i = st < 0 ? n - 1 : n;
    return i;
  };
  const int64_t b = adjust(start, st < 0 ? n - 1 : 0);
  const int64_t e = adjust(stop, st < 0 ? -1 : n);
  std::vector<int64_t> idx;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) idx.push_back(i);
  if (str) {
    std::string out;
    for (int64_t i : idx) out += obj.str().substr(at[size_t(i)], at[size_t(i) + 1] - at[size_t(i)]);
    return Value(out);
  }
  std::vector<Value> out;
  for (int64_t i : idx) out.push_back(obj.list().items[size_t(i)]);
  return Value::list(std::move(out), obj.list().is_tuple);
}

}  // namespace lockstep::chat
