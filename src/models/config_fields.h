// Reading config.json fields with errors that name the file and the field: the typed accessor
// the family parsers share (models/config.cpp, models/gemma4_config.cpp), and the helpers more
// than one family's parser calls. Internal to src/models.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/config.h"

namespace lockstep::config_detail {

using json = nlohmann::json;

// Typed access to one JSON object; every error names the file and the (dotted) field.
class Fields {
 public:
  Fields(const json& obj, std::string source, std::string prefix)
      : obj_(obj), source_(std::move(source)), prefix_(std::move(prefix)) {}

  // Absent and null both mean "use the default", as in transformers.
  bool has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  const json& raw(const char* key) const { return obj_[key]; }
  std::string name(const char* key) const { return prefix_ + key; }
  const std::string& source() const { return source_; }

  int64_t integer(const char* key) const {
    if (!has(key)) fail(source_, ": required field \"", name(key), "\" is missing");
    return as_int(key);
  }
  int64_t integer(const char* key, int64_t def) const { return has(key) ? as_int(key) : def; }
  int64_t positive(const char* key) const {
    int64_t v = integer(key);
    if (v <= 0) fail(source_, ": field \"", name(key), "\" must be positive, found ", v);
    return v;
  }
  double number(const char* key, double def) const {
    if (!has(key)) return def;
    if (!obj_[key].is_number())
      fail(source_, ": field \"", name(key), "\" must be a number, found ", obj_[key].dump());
    return obj_[key].get<double>();
  }
  bool boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    if (!obj_[key].is_boolean())
      fail(source_, ": field \"", name(key), "\" must be true or false, found ", obj_[key].dump());
    return obj_[key].get<bool>();
  }
  std::string string(const char* key, const std::string& def) const {
    if (!has(key)) return def;
    if (!obj_[key].is_string())
      fail(source_, ": field \"", name(key), "\" must be a string, found ", obj_[key].dump());
    return obj_[key].get<std::string>();
  }

 private:
  int64_t as_int(const char* key) const {
    const json& v = obj_[key];
    // 1.0 written by a Python float is accepted; 1.5 is not.
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())
      return static_cast<int64_t>(v.get<double>());
    fail(source_, ": field \"", name(key), "\" must be an integer, found ", v.dump());
  }
  const json& obj_;
  std::string source_, prefix_;
};

// int, list of ints, or null (no ids).
std::vector<int32_t> token_ids(const Fields& f, const char* key);

// Scaling fields shared by the legacy "rope_scaling" object and "rope_parameters" into
// c.rope_scaling (type: default/mrope, linear, llama3, yarn; others refused naming the field).
void parse_scaling(const Fields& s, const std::string& type, ModelConfig& c);

// layer_types, when present: one of `kinds` per layer (index into kinds per layer). Absent: empty.
std::vector<size_t> layer_kinds(const Fields& f, const json& obj, int64_t layers,
                                std::initializer_list<const char*> kinds);

// The Gemma 4 text config `obj` (the top level for gemma4_text, text_config for gemma4), with
// transformers 5.17's Gemma4TextConfig defaults (models/gemma4_config.cpp).
void parse_gemma4(const Fields& top, const Fields& f, const json& obj, ModelConfig& c);

}  // namespace lockstep::config_detail
