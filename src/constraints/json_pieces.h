// Grammar pieces for JSON text, shared by the schema compiler: whitespace, strings in the
// canonical escaping, numbers, literals and "any JSON value". Each piece is one rule of the
// builder, made once, so every use shares its grammar positions (and so its cached token masks).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "constraints/grammar.h"

namespace lockstep::constraints {

// The canonical text of a JSON string's content (without quotes), and of a whole value (compact,
// members in their stored order, integral numbers without a fraction).
std::string json_escape(std::string_view utf8);
std::string json_quoted(std::string_view utf8);  // '"' + json_escape + '"'
std::string json_canonical(const nlohmann::ordered_json& value);

class JsonPieces {
 public:
  JsonPieces(GrammarBuilder& builder, int max_whitespace);

  ExprPtr ws();                                 // optional bounded whitespace
  ExprPtr string_char(const CodepointSet& set);  // one character of a string's content, escaped
  ExprPtr any_char();
  ExprPtr any_string();
  ExprPtr integer();
  ExprPtr number();
  ExprPtr boolean();
  ExprPtr null();
  ExprPtr any_value();
  ExprPtr any_object();
  ExprPtr any_array();
  // "text" with its content escaped canonically.
  ExprPtr string_literal(std::string_view utf8);
  // Integers in [lo, hi]; nullopt: unbounded on that side.
  ExprPtr integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);

 private:
  uint32_t rule(const char* name, uint32_t& slot);

  GrammarBuilder& b_;
  int max_ws_;
  ExprPtr ws_, any_char_;
  uint32_t string_ = UINT32_MAX, integer_ = UINT32_MAX, number_ = UINT32_MAX,
           value_ = UINT32_MAX, object_ = UINT32_MAX, array_ = UINT32_MAX;
};

}  // namespace lockstep::constraints
