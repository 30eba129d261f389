// JSON in (request messages and tools -> Values, keeping key order) and out (the `tojson` filter,
// byte-identical to Python's json.dumps as transformers calls it: ensure_ascii=False by default,
// Python float repr, ", "/": " separators, optional indent and sort_keys).
#include <algorithm>
#include <cstdio>

#include "chat/builtins.h"
#include "chat/text.h"
#include "core/error.h"

namespace lockstep::chat {

namespace {

// Values built from JSON are walked recursively here, by the Value destructor, by `tojson` and by
// templates; a client could otherwise nest 30,000 arrays and overflow the stack. The server refuses
// bodies nested deeper than its own, smaller limit before they get here (naming the field).
constexpr int kMaxJsonDepth = 128;

template <typename J>
Value convert(const J& j, int depth) {
  const bool container = j.is_array() || j.is_object();
  if (container && depth >= kMaxJsonDepth)
    fail("JSON value nested deeper than ", kMaxJsonDepth, " levels of arrays and objects");
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      return u > uint64_t(INT64_MAX) ? Value(double(u)) : Value(int64_t(u));
    }
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      for (const auto& e : j) items.push_back(convert(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (auto it = j.begin(); it != j.end(); ++it) d->items.emplace_back(Value(it.key()), convert(it.value(), depth + 1));
      return Value(std::move(d));
    }
    default: fail("unsupported JSON value (binary or discarded)");
  }
}

void quote(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (uint32_t cp : text::decode(s)) {
    char buf[16];
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
      if (cp >= 0x10000) {  // UTF-16 surrogate pair, as Python writes it
        const uint32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out += buf;
    } else {
      text::append_utf8(out, cp);
    }
  }
  out += '"';
}

std::string number(const Value& v) {
  if (v.is_bool()) return v.boolean() ? "true" : "false";
  if (v.is_int()) return std::to_string(v.integer());
  const double d = v.number();
  if (d != d) return "NaN";
  if (d == 1.0 / 0.0) return "Infinity";
  if (d == -1.0 / 0.0) return "-Infinity";
  return text::float_repr(d);
}

struct Writer {
  const JsonStyle& style;
  std::string indent;  // meaningful only when indented
  bool indented;
  std::string item_sep, key_sep;
  std::string out;

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += indent;
  }

  void write(const Value& v, int level) {
    switch (v.kind()) {
      case Value::Kind::None: out += "null"; return;
      case Value::Kind::Bool:
      case Value::Kind::Int:
      case Value::Kind::Float: out += number(v); return;
      case Value::Kind::String: quote(out, v.str(), style.ensure_ascii); return;
      case Value::Kind::List: {
        const auto& items = v.list().items;
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (indented) newline(level + 1);
          write(items[i], level + 1);
        }
        if (indented) newline(level);
        out += ']';
        return;
      }
      case Value::Kind::Dict: {
        if (v.dict().is_namespace || v.dict().is_object)
          fail("Object of type ", v.type_name(), " is not JSON serializable");
        std::vector<std::pair<Value, Value>> items = v.dict().items;
        if (items.empty()) {
          out += "{}";
          return;
        }
        if (style.sort_keys)
          std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return less(a.first, b.first); });
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (indented) newline(level + 1);
          const Value& k = items[i].first;
          if (k.is_string()) quote(out, k.str(), style.ensure_ascii);
          else if (k.is_none()) out += "\"null\"";
          else if (k.is_number()) out += "\"" + number(k) + "\"";
          else fail("keys must be str, int, float, bool or None, not ", k.type_name());
          out += key_sep;
          write(items[i].second, level + 1);
        }
        if (indented) newline(level);
        out += '}';
        return;
      }
      default: fail("Object of type ", v.type_name(), " is not JSON serializable");
    }
  }
};

}  // namespace

Value from_json(const nlohmann::ordered_json& j) { return convert(j, 0); }
Value from_json(const nlohmann::json& j) { return convert(j, 0); }

std::string to_json(const Value& v, const JsonStyle& style) {
  Writer w{style, "", false, style.item_sep, style.key_sep, ""};
  if (style.indent && !style.indent->is_none()) {
    w.indented = true;
    if (style.indent->is_string()) w.indent = style.indent->str();
    else w.indent = std::string(size_t(std::max<int64_t>(0, want_int(*style.indent, "indent"))), ' ');
  }
  if (w.item_sep.empty()) w.item_sep = w.indented ? "," : ", ";
  if (w.key_sep.empty()) w.key_sep = ": ";
  w.write(v, 0);
  return w.out;
}

}  // namespace lockstep::chat
