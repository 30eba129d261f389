// Typed access to tokenizer.json fields. Every accessor takes `where`, the path of the object in
// the file ("tokenizer.json: pre_tokenizer.pretokenizers[1]"), so a malformed file is reported as
// "<where>.<field>: expected <type>" rather than as a bare JSON type error.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "tokenizer/regex.h"

namespace lockstep::tok {

using json = nlohmann::json;

inline std::string sub(const std::string& where, const std::string& key) {
  return where + "." + key;
}

inline const json* optional(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

inline const json& required(const json& obj, const char* key, const std::string& where) {
  if (!obj.is_object()) fail(where, ": expected an object");
  const json* v = optional(obj, key);
  if (!v) fail(sub(where, key), ": missing (required)");
  return *v;
}

inline std::string string_field(const json& obj, const char* key, const std::string& where) {
  const json& v = required(obj, key, where);
  if (!v.is_string()) fail(sub(where, key), ": expected a string");
  return v.get<std::string>();
}

inline std::string string_or(const json& obj, const char* key, const std::string& where,
                             const std::string& fallback) {
  const json* v = optional(obj, key);
  if (!v) return fallback;
  if (!v->is_string()) fail(sub(where, key), ": expected a string");
  return v->get<std::string>();
}

inline bool bool_or(const json& obj, const char* key, const std::string& where, bool fallback) {
  const json* v = optional(obj, key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(sub(where, key), ": expected true or false");
  return v->get<bool>();
}

inline int64_t int_field(const json& obj, const char* key, const std::string& where) {
  const json& v = required(obj, key, where);
  if (!v.is_number_integer()) fail(sub(where, key), ": expected an integer");
  return v.get<int64_t>();
}

inline const json& array_field(const json& obj, const char* key, const std::string& where) {
  const json& v = required(obj, key, where);
  if (!v.is_array()) fail(sub(where, key), ": expected an array");
  return v;
}

// {"String": "x"} or {"Regex": "x"} as used by Split and Replace; returns a PCRE2 pattern and
// sets *literal (when given) to the String form's text, or clears it for a regex.
inline std::string pattern_field(const json& obj, const char* key, const std::string& where,
                                 std::string* literal = nullptr) {
  const json& p = required(obj, key, where);
  const std::string w = sub(where, key);
  if (const json* s = optional(p, "String")) {
    if (!s->is_string()) fail(w, ".String: expected a string");
    if (literal) *literal = s->get<std::string>();
    return Regex::escape(s->get<std::string>());
  }
  if (const json* r = optional(p, "Regex")) {
    if (!r->is_string()) fail(w, ".Regex: expected a string");
    if (literal) literal->clear();
    return r->get<std::string>();
  }
  fail(w, ": expected {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace lockstep::tok
