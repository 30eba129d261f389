// The JSON Schema compiler's internals, shared by its source files (json_schema.cpp: dispatch,
// references, enums, scalars; json_schema_containers.cpp: objects and arrays;
// json_schema_merge.cpp: allOf merging and oneOf exclusivity).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "constraints/json_pieces.h"
#include "constraints/json_schema.h"

namespace lockstep::constraints {

using Json = nlohmann::ordered_json;

// Keywords that never constrain an instance here (annotations, and containers of definitions,
// which are reached through $ref).
bool is_annotation(const std::string& keyword);
// The schema without its annotations (and without the keywords in `drop`).
Json assertions_of(const Json& schema, std::initializer_list<const char*> drop = {});

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& options, GrammarBuilder& builder);

  ExprPtr compile(const Json& schema, const std::string& path);

  // The schema a local reference ("#", "#/$defs/x", percent- and ~-escaped) points to.
  const Json& resolve(const std::string& ref, const std::string& path) const;
  bool draft7() const { return draft7_; }

  // json_schema_merge.cpp
  // One schema equivalent to all of `schemas` together; throws when they cannot be merged.
  Json merge(const std::vector<Json>& schemas, const std::string& path, int depth = 0) const;
  // Throws unless no instance can match two of `branches`.
  void require_exclusive(const std::vector<Json>& branches, const std::string& path) const;

 private:
  [[noreturn]] void error(const std::string& path, const std::string& what) const;
  ExprPtr compile_ref(const std::string& ref, const std::string& path);
  ExprPtr compile_enum(const Json& s, const std::string& path);
  ExprPtr compile_types(const Json& s, const std::string& path);
  ExprPtr compile_string(const Json& s, const std::string& path);
  ExprPtr compile_integer(const Json& s, const std::string& path);
  ExprPtr compile_number(const Json& s, const std::string& path);
  // json_schema_containers.cpp
  ExprPtr compile_object(const Json& s, const std::string& path);
  ExprPtr compile_array(const Json& s, const std::string& path);
  ExprPtr key_excluding(const std::vector<std::string>& names);

  // json_schema_merge.cpp helpers
  Json resolve_top(const Json& s, const std::string& path, int depth) const;
  uint32_t type_set(const Json& s, const std::string& path, int depth) const;

  uint32_t count_of(const Json& s, const char* key, const std::string& path) const;

  const Json& root_;
  JsonSchemaOptions options_;
  GrammarBuilder& b_;
  JsonPieces pieces_;
  bool draft7_ = false;
  std::map<std::string, uint32_t> ref_rules_;
  size_t helper_rules_ = 0;
};

// ECMAScript-flavoured regular expressions for the supported string formats; nullptr if none.
const char* format_regex(const std::string& format);

}  // namespace lockstep::constraints
