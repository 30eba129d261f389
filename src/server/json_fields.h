// Typed access to request-body fields. Each getter treats a missing field and JSON null alike
// (OpenAI clients send explicit nulls for unset options) and throws a 400 ApiError naming the
// field when the value has the wrong type or lies outside its range.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::server {

using Body = nlohmann::ordered_json;

// The body of a POST, parsed; malformed JSON or a non-object is a 400 (param null).
Body parse_body(const std::string& text);

bool has(const Body& body, const char* key);  // present and not null

std::optional<int64_t> get_int(const Body& body, const char* key, int64_t min, int64_t max);
std::optional<double> get_number(const Body& body, const char* key, double min, double max);
std::optional<bool> get_bool(const Body& body, const char* key);
std::optional<std::string> get_string(const Body& body, const char* key);
// A string or a list of strings (OpenAI's `stop`), at most `max_items`.
std::vector<std::string> get_string_or_list(const Body& body, const char* key, size_t max_items);

// "a string", "an integer", ...: for messages that say what was found.
std::string json_kind(const Body& value);

}  // namespace lockstep::server
