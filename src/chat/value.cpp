#include "chat/value.h"

#include "chat/text.h"
#include "core/error.h"

namespace lockstep::chat {

const Value* Dict::find(const Value& key) const {
  for (const auto& kv : items)
    if (equals(kv.first, key)) return &kv.second;
  return nullptr;
}

Value* Dict::find(const Value& key) {
  for (auto& kv : items)
    if (equals(kv.first, key)) return &kv.second;
  return nullptr;
}

const Value* Dict::find_key(const std::string& key) const {
  for (const auto& kv : items)
    if (kv.first.is_string() && kv.first.str() == key) return &kv.second;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (Value* v = find(key)) {
    *v = std::move(value);
  } else {
    items.emplace_back(std::move(key), std::move(value));
  }
}

const Value* Args::get(size_t i, const std::string& name) const {
  if (i < positional.size()) return &positional[i];
  for (const auto& kv : keywords)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

Value Value::list(std::vector<Value> items, bool tuple) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  l->is_tuple = tuple;
  return Value(std::move(l));
}

Value Value::function(std::string name, std::function<Value(const Args&)> fn) {
  return Value(std::make_shared<Callable>(Callable{std::move(name), std::move(fn)}));
}

const void* Value::identity() const {
  switch (kind()) {
    case Kind::List: return &list();
    case Kind::Dict: return &dict();
    case Kind::Callable: return &callable();
    default: return nullptr;
  }
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return boolean();
    case Kind::Int: return integer() != 0;
    case Kind::Float: return number() != 0.0;
    case Kind::String: return !str().empty();
    case Kind::List: return !list().items.empty();
    case Kind::Dict: return dict().is_namespace || dict().is_object || !dict().items.empty();
    case Kind::Callable: return true;
  }
  return false;
}

std::string Value::to_str() const {
  switch (kind()) {
    case Kind::Undefined: return "";
    case Kind::String: return str();
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return boolean() ? "True" : "False";
    case Kind::Int: return std::to_string(integer());
    case Kind::Float: return text::float_repr(number());
    case Kind::String: return text::string_repr(str());
    case Kind::List: {
      const List& l = list();
      std::string out = l.is_tuple ? "(" : "[";
      for (size_t i = 0; i < l.items.size(); ++i) out += (i ? ", " : "") + l.items[i].repr();
      if (l.is_tuple && l.items.size() == 1) out += ",";
      return out + (l.is_tuple ? ")" : "]");
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict().items) {
        out += (first ? "" : ", ") + k.repr() + ": " + v.repr();
        first = false;
      }
      out += "}";
      return dict().is_namespace ? "<Namespace " + out + ">" : out;
    }
    case Kind::Callable: return "<function " + callable().name + ">";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return list().is_tuple ? "tuple" : "list";
    case Kind::Dict: return dict().is_namespace ? "Namespace" : "dict";
    case Kind::Callable: return "function";
  }
  return "?";
}

bool equals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.number() == b.number();
    return a.integer() == b.integer();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.str() == b.str();
    case K::List: {
      const auto& x = a.list().items;
      const auto& y = b.list().items;
      if (a.list().is_tuple != b.list().is_tuple || x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case K::Dict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.is_namespace || y.is_namespace || x.is_object || y.is_object) return &x == &y;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !equals(v, *w)) return false;
      }
      return true;
    }
    case K::Callable: return &a.callable() == &b.callable();
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.number() < b.number();
    return a.integer() < b.integer();
  }
  // UTF-8 byte order is code point order, which is how Python orders strings.
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined()) fail("cannot compare an undefined value");
  fail("'<' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return int64_t(text::code_point_count(v.str()));
    case Value::Kind::List: return int64_t(v.list().items.size());
    case Value::Kind::Dict: return int64_t(v.dict().items.size());
    default: fail("object of type '", v.type_name(), "' has no len()");
  }
}

std::vector<Value> iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.kind()) {
    case Value::Kind::Undefined: return out;
    case Value::Kind::List: return v.list().items;
    case Value::Kind::Dict:
      if (v.dict().is_namespace || v.dict().is_object) break;
      for (const auto& kv : v.dict().items) out.push_back(kv.first);
      return out;
    case Value::Kind::String: {
      const std::string& s = v.str();
      const auto at = text::code_point_offsets(s);
      for (size_t i = 0; i + 1 < at.size(); ++i) out.emplace_back(s.substr(at[i], at[i + 1] - at[i]));
      return out;
    }
    default: break;
  }
  fail("'", v.type_name(), "' object is not iterable");
}

}  // namespace lockstep::chat
