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

// Arrays and objects a body may nest. Client JSON becomes chat-template values and is copied and
// walked recursively; without a limit a 60 KB body of `[` overflows the stack. JSON Schemas in
// `tools` rarely pass 20 levels.
constexpr int kMaxJsonDepth = 64;

// The body of a POST, parsed. Malformed JSON, a number out of range (1e999) or a non-object is a
// 400 `invalid_json` (param null); nesting past kMaxJsonDepth is a 400 `invalid_value` naming the
// top-level field it is in. The parser itself is iterative, so the check runs before any
// recursive walk.
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
