#include "server/json_fields.h"

#include <cmath>

#include "server/api_error.h"

namespace lockstep::server {

Body parse_body(const std::string& text) {
  using Event = nlohmann::ordered_json::parse_event_t;
  std::string field;  // the top-level key whose value is being parsed
  // Called by nlohmann's (iterative) parser for every event; `depth` counts enclosing containers.
  auto limit_depth = [&field](int depth, Event event, Body& parsed) {
    if (event == Event::key && depth == 1) field = parsed.get<std::string>();
    if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth)
      throw ApiError(400, (field.empty() ? std::string("the request body") : field) +
                              ": nested deeper than " + std::to_string(kMaxJsonDepth) +
                              " levels of arrays and objects",
                     field, "invalid_request_error", "invalid_value");
    return true;
  };
  Body body;
  try {
    body = Body::parse(text, limit_depth);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message says where the JSON breaks ("at line 1, column 9: ...").
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what(), "",
                   "invalid_request_error", "invalid_json");
  } catch (const nlohmann::json::out_of_range& e) {
    // A number no double holds ("1e999"): nlohmann says which ("number overflow parsing '1e999'").
    throw ApiError(400, std::string("the request body holds a number no double can represent: ") + e.what(), "",
                   "invalid_request_error", "invalid_json");
  }
  if (!body.is_object())
    throw ApiError(400, "the request body must be a JSON object, got " + json_kind(body), "",
                   "invalid_request_error", "invalid_json");
  return body;
}

bool has(const Body& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

std::string json_kind(const Body& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

std::optional<int64_t> get_int(const Body& body, const char* key, int64_t min, int64_t max) {
  if (!has(body, key)) return std::nullopt;
  const Body& v = body.at(key);
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    x = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) &&
             v.get<double>() == std::floor(v.get<double>()) && std::fabs(v.get<double>()) < 9e15) {
    x = static_cast<int64_t>(v.get<double>());  // 16.0 is an integer to JavaScript clients
  } else {
    bad_field(key, "expected an integer, got " + json_kind(v), "invalid_type");
  }
  if (x < min || x > max)
    bad_field(key, "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
                       std::to_string(x),
              "out_of_range");
  return x;
}

std::optional<double> get_number(const Body& body, const char* key, double min, double max) {
  if (!has(body, key)) return std::nullopt;
  const Body& v = body.at(key);
  if (!v.is_number()) bad_field(key, "expected a number, got " + json_kind(v), "invalid_type");
  const double x = v.get<double>();
  if (!(x >= min && x <= max)) {
    nlohmann::json lo = min, hi = max, got = x;
    bad_field(key, "must be in [" + lo.dump() + ", " + hi.dump() + "], got " + got.dump(),
              "out_of_range");
  }
  return x;
}

std::optional<bool> get_bool(const Body& body, const char* key) {
  if (!has(body, key)) return std::nullopt;
  const Body& v = body.at(key);
  if (!v.is_boolean()) bad_field(key, "expected a boolean, got " + json_kind(v), "invalid_type");
  return v.get<bool>();
}

std::optional<std::string> get_string(const Body& body, const char* key) {
  if (!has(body, key)) return std::nullopt;
  const Body& v = body.at(key);
  if (!v.is_string()) bad_field(key, "expected a string, got " + json_kind(v), "invalid_type");
  return v.get<std::string>();
}

std::vector<std::string> get_string_or_list(const Body& body, const char* key, size_t max_items) {
  std::vector<std::string> out;
  if (!has(body, key)) return out;
  const Body& v = body.at(key);
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    for (const auto& item : v) {
      if (!item.is_string())
        bad_field(key, "expected a string or a list of strings, found " + json_kind(item) +
                           " in the list", "invalid_type");
      out.push_back(item.get<std::string>());
    }
  } else {
    bad_field(key, "expected a string or a list of strings, got " + json_kind(v), "invalid_type");
  }
  if (out.size() > max_items)
    bad_field(key, "at most " + std::to_string(max_items) + " entries, got " +
                       std::to_string(out.size()), "out_of_range");
  for (const auto& s : out)
    if (s.empty()) bad_field(key, "entries must not be empty", "invalid_value");
  return out;
}

}  // namespace lockstep::server
