// Jinja2's tests (`x is defined`, `x is string`, `x is divisibleby(3)`, ...), with Python's type
// rules: bool counts as a number but not as an integer, Undefined is iterable, a dict is a
// sequence.
#include <functional>
#include <map>

#include "chat/builtins.h"
#include "chat/eval.h"
#include "chat/text.h"
#include "core/error.h"

namespace lockstep::chat {

namespace {

using TestFn = std::function<bool(const Value&, const Args&)>;

const Value& arg(const Args& a, const char* test) {
  const Value* v = a.get(0, "value");
  if (!v) fail("test '", test, "' takes one argument");
  return *v;
}

bool compare(const Value& x, const Value& y, const std::string& op) {
  if (op == "==") return equals(x, y);
  if (op == "!=") return !equals(x, y);
  if (op == "<") return less(x, y);
  if (op == "<=") return !less(y, x);
  if (op == ">") return less(y, x);
  return !less(x, y);
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) return container.str().find(want_string(item, "'in' operand")) != std::string::npos;
  if (container.is_dict() && container.is_mapping()) {
    if (item.is_list() && !item.list().is_tuple) fail("unhashable type: 'list'");
    if (item.is_dict()) fail("unhashable type: '", item.type_name(), "'");
    return container.dict().find(item) != nullptr;
  }
  for (const Value& v : iterate(container))
    if (equals(v, item)) return true;
  return false;
}

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> t = [] {
    std::map<std::string, TestFn> m;
    m["defined"] = [](const Value& v, const Args&) { return !v.is_undefined(); };
    m["undefined"] = [](const Value& v, const Args&) { return v.is_undefined(); };
    m["none"] = [](const Value& v, const Args&) { return v.is_none(); };
    m["boolean"] = [](const Value& v, const Args&) { return v.is_bool(); };
    m["true"] = [](const Value& v, const Args&) { return v.is_bool() && v.boolean(); };
    m["false"] = [](const Value& v, const Args&) { return v.is_bool() && !v.boolean(); };
    m["integer"] = [](const Value& v, const Args&) { return v.is_int(); };
    m["float"] = [](const Value& v, const Args&) { return v.is_float(); };
    m["number"] = [](const Value& v, const Args&) { return v.is_number(); };
    m["string"] = [](const Value& v, const Args&) { return v.is_string(); };
    m["mapping"] = [](const Value& v, const Args&) { return v.is_mapping(); };
    m["iterable"] = [](const Value& v, const Args&) {
      return v.is_undefined() || v.is_string() || v.is_list() || v.is_mapping();
    };
    m["sequence"] = [](const Value& v, const Args&) {
      return v.is_undefined() || v.is_string() || v.is_list() || v.is_mapping();
    };
    // Jinja2's Undefined defines __call__ (to raise), so it counts as callable.
    m["callable"] = [](const Value& v, const Args&) { return v.is_callable() || v.is_undefined(); };
    // Python's `value % 2 == 1` etc., so floats work too.
    m["odd"] = [](const Value& v, const Args&) { return equals(arithmetic("%", v, Value(2)), Value(1)); };
    m["even"] = [](const Value& v, const Args&) { return equals(arithmetic("%", v, Value(2)), Value(0)); };
    m["divisibleby"] = [](const Value& v, const Args& a) {
      return equals(arithmetic("%", v, arg(a, "divisibleby")), Value(0));
    };
    // str.islower()/isupper(): no characters of the other case and at least one cased one.
    m["lower"] = [](const Value& v, const Args&) {
      const std::string t = v.to_str();
      return text::lower(t) == t && text::upper(t) != t;
    };
    m["upper"] = [](const Value& v, const Args&) {
      const std::string t = v.to_str();
      return text::upper(t) == t && text::lower(t) != t;
    };
    m["sameas"] = [](const Value& v, const Args& a) {
      const Value& o = arg(a, "sameas");
      if (v.identity() || o.identity()) return v.identity() == o.identity();
      return v.kind() == o.kind() && equals(v, o);
    };
    m["in"] = [](const Value& v, const Args& a) { return contains(arg(a, "in"), v); };
    m["escaped"] = [](const Value&, const Args&) { return false; };
    const std::pair<const char*, const char*> ops[] = {
        {"eq", "=="}, {"equalto", "=="}, {"==", "=="}, {"ne", "!="}, {"!=", "!="},
        {"lt", "<"},  {"lessthan", "<"}, {"<", "<"},   {"le", "<="}, {"<=", "<="},
        {"gt", ">"},  {"greaterthan", ">"}, {">", ">"}, {"ge", ">="}, {">=", ">="}};
    for (const auto& [name, op] : ops) {
      const std::string o = op;
      m[name] = [o](const Value& v, const Args& a) { return compare(v, arg(a, "comparison"), o); };
    }
    return m;
  }();
  return t;
}

}  // namespace

bool has_test(const std::string& name) { return tests().count(name) != 0; }

bool apply_test(const std::string& name, const Value& subject, const Args& args) {
  const auto it = tests().find(name);
  if (it == tests().end()) fail("no test named '", name, "'");
  return it->second(subject, args);
}

// Used by the evaluator for `in` / `not in`.
bool value_in(const Value& item, const Value& container) { return contains(container, item); }

}  // namespace lockstep::chat
