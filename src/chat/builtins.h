// What templates can call or look up beyond the grammar: attribute and item access (with Jinja2's
// getattr-then-getitem rules), Python methods of str/dict/list, filters, tests, and JSON in and
// out. The evaluator and the filters share these so that `x.y`, `x['y']` and `map(attribute='y')`
// all resolve the same way.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "chat/value.h"

namespace lockstep::chat {

// obj.name: a method of str/dict/list if there is one, else the mapping's item, else Undefined.
// Throws for attribute access on Undefined (as Jinja2 does).
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: the item if there is one, else (for string keys) the attribute, else Undefined.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] with Python's rules; null pointers are omitted bounds.
Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step);

bool has_filter(const std::string& name);
Value apply_filter(const std::string& name, const Value& subject, const Args& args);
bool has_test(const std::string& name);
bool apply_test(const std::string& name, const Value& subject, const Args& args);
bool value_in(const Value& item, const Value& container);  // Python `item in container`

// Throws lockstep::Error for a value nested deeper than 128 arrays/objects (the walk is recursive).
Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);
// Python's json.dumps(v, ensure_ascii, indent, separators, sort_keys), which is what transformers'
// `tojson` filter calls. indent: nullptr for none, else an int (spaces) or string value.
struct JsonStyle {
  const Value* indent = nullptr;
  std::string item_sep;  // empty: json.dumps' default for the indent mode
  std::string key_sep;
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string to_json(const Value& v, const JsonStyle& style);

// Argument helpers shared by builtins.
const std::string& want_string(const Value& v, const char* what);
int64_t want_int(const Value& v, const char* what);

}  // namespace lockstep::chat
