// JSON Schema compiler: keyword checks, dispatch, references, enum/const, strings and numbers.
#include "constraints/json_schema.h"

#include <cmath>
#include <set>

#include "constraints/json_schema_compiler.h"
#include "constraints/regex.h"
#include "core/error.h"

namespace lockstep::constraints {

namespace {

const std::set<std::string>& annotations() {
  static const std::set<std::string> k = {
      "title",    "description", "default",          "examples",        "$comment",
      "$schema",  "readOnly",    "writeOnly",        "deprecated",      "contentMediaType",
      "contentEncoding", "$defs", "definitions",     "$id"};
  return k;
}

const std::set<std::string>& supported() {
  static const std::set<std::string> k = {
      "type",      "enum",        "const",     "properties",       "required",
      "additionalProperties",     "items",     "prefixItems",      "additionalItems",
      "minItems",  "maxItems",    "uniqueItems", "anyOf",          "oneOf",
      "allOf",     "$ref",        "minLength", "maxLength",        "pattern",
      "format",    "minimum",     "maximum",   "exclusiveMinimum", "exclusiveMaximum"};
  return k;
}

bool is_integral(const Json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && d == std::floor(d);
}

bool has_type(const Json& v, const std::string& type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") return is_integral(v);
  return false;
}

// JSON Schema keywords (drafts 3 to 2020-12) that constrain instances and are not supported:
// refused. Members that are no JSON Schema keyword at all are ignored, as the specification
// says (they cannot constrain anything).
const std::set<std::string>& unsupported() {
  static const std::set<std::string> k = {
      "not", "if", "then", "else", "dependencies", "dependentRequired", "dependentSchemas",
      "patternProperties", "propertyNames", "minProperties", "maxProperties", "multipleOf",
      "contains", "minContains", "maxContains", "unevaluatedProperties", "unevaluatedItems",
      "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor",
      "$vocabulary", "extends", "disallow", "divisibleBy"};
  return k;
}

}  // namespace

bool is_annotation(const std::string& keyword) {
  return annotations().count(keyword) != 0 ||
         (supported().count(keyword) == 0 && unsupported().count(keyword) == 0);
}

Json assertions_of(const Json& schema, std::initializer_list<const char*> drop) {
  Json out = Json::object();
  for (const auto& [k, v] : schema.items()) {
    if (is_annotation(k)) continue;
    bool dropped = false;
    for (const char* d : drop) dropped = dropped || k == d;
    if (!dropped) out[k] = v;
  }
  return out;
}

SchemaCompiler::SchemaCompiler(const Json& root, const JsonSchemaOptions& options, GrammarBuilder& builder)
    : root_(root), options_(options), b_(builder), pieces_(builder, options.max_whitespace) {
  draft7_ = options.dialect == JsonSchemaOptions::Dialect::kDraft7;
  if (options.dialect == JsonSchemaOptions::Dialect::kAuto && root.is_object() && root.contains("$schema") &&
      root["$schema"].is_string()) {
    const std::string uri = root["$schema"];
    for (const char* d : {"draft-03", "draft-04", "draft-06", "draft-07"})
      if (uri.find(d) != std::string::npos) draft7_ = true;
  }
}

void SchemaCompiler::error(const std::string& path, const std::string& what) const {
  fail("json schema at #", path, ": ", what);
}

uint32_t SchemaCompiler::count_of(const Json& s, const char* key, const std::string& path) const {
  if (!s.contains(key)) return 0;
  const Json& v = s[key];
  if (!is_integral(v) || v.get<double>() < 0) error(path + "/" + key, std::string("'") + key + "' must be a non-negative integer");
  const double d = v.get<double>();
  if (d > 1e6) error(path + "/" + key, std::string("'") + key + "' above 1000000 is not supported");
  return static_cast<uint32_t>(d);
}

const Json& SchemaCompiler::resolve(const std::string& ref, const std::string& path) const {
  if (ref.empty() || ref[0] != '#')
    error(path + "/$ref", "only local references (\"#...\") are supported, not '" + ref + "'");
  std::string pointer;
  for (size_t i = 1; i < ref.size(); ++i) {  // percent-decoding (URI fragment)
    if (ref[i] == '%' && i + 2 < ref.size()) {
      pointer += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      pointer += ref[i];
    }
  }
  if (!pointer.empty() && pointer[0] != '/')
    error(path + "/$ref", "anchor references ('" + ref + "') are not supported");
  try {
    const Json& target = root_.at(Json::json_pointer(pointer));
    return target;
  } catch (const std::exception&) {
    error(path + "/$ref", "reference '" + ref + "' points to nothing");
  }
}

ExprPtr SchemaCompiler::compile_ref(const std::string& ref, const std::string& path) {
  auto it = ref_rules_.find(ref);
  if (it != ref_rules_.end()) return constraints::ref(it->second);
  const uint32_t rule = b_.add_rule("ref" + ref);
  ref_rules_.emplace(ref, rule);
  const Json& target = resolve(ref, path);
  b_.define(rule, compile(target, ref.substr(1)));
  return constraints::ref(rule);
}

ExprPtr SchemaCompiler::compile(const Json& s, const std::string& path) {
  if (s.is_boolean()) return s.get<bool>() ? pieces_.any_value() : never();
  if (!s.is_object()) error(path, "a schema must be an object or a boolean");
  for (const auto& [k, v] : s.items()) {
    if (unsupported().count(k)) error(path, "unsupported keyword '" + k + "'");
  }
  if (s.contains("$id") && !path.empty()) error(path, "unsupported keyword '$id' (below the root)");
  const Json rest = assertions_of(s);
  if (s.contains("$ref")) {
    if (!s["$ref"].is_string()) error(path + "/$ref", "'$ref' must be a string");
    if (draft7_ || rest.size() == 1) return compile_ref(s["$ref"], path);
    return compile(merge({Json{{"$ref", s["$ref"]}}, assertions_of(s, {"$ref"})}, path), path);
  }
  if (s.contains("allOf")) {
    if (!s["allOf"].is_array() || s["allOf"].empty()) error(path + "/allOf", "'allOf' must be a non-empty array");
    std::vector<Json> parts(s["allOf"].begin(), s["allOf"].end());
    parts.push_back(assertions_of(s, {"allOf"}));
    return compile(merge(parts, path), path);
  }
  if (s.contains("anyOf") || s.contains("oneOf")) {
    if (s.contains("anyOf") && s.contains("oneOf"))
      error(path, "'anyOf' together with 'oneOf' in one schema is not supported");
    const std::string key = s.contains("anyOf") ? "anyOf" : "oneOf";
    const Json& list = s[key];
    if (!list.is_array() || list.empty()) error(path + "/" + key, "'" + key + "' must be a non-empty array");
    const Json siblings = assertions_of(s, {"anyOf", "oneOf"});
    std::vector<Json> branches;
    for (const Json& branch : list)
      branches.push_back(siblings.empty() ? branch : merge({siblings, branch}, path));
    if (key == "oneOf" && !options_.one_of_as_any_of) require_exclusive(branches, path + "/oneOf");
    std::vector<ExprPtr> alts;
    for (size_t i = 0; i < branches.size(); ++i)
      alts.push_back(compile(branches[i], path + "/" + key + "/" + std::to_string(i)));
    return alt(std::move(alts));
  }
  if (s.contains("enum") || s.contains("const")) return compile_enum(s, path);
  return compile_types(s, path);
}

ExprPtr SchemaCompiler::compile_enum(const Json& s, const std::string& path) {
  std::vector<Json> values;
  if (s.contains("enum")) {
    if (!s["enum"].is_array()) error(path + "/enum", "'enum' must be an array");
    values.assign(s["enum"].begin(), s["enum"].end());
  }
  if (s.contains("const")) {
    const std::string c = json_canonical(s["const"]);
    if (s.contains("enum")) {
      std::vector<Json> kept;
      for (const Json& v : values)
        if (json_canonical(v) == c) kept.push_back(v);
      values = kept;
    } else {
      values = {s["const"]};
    }
  }
  std::vector<std::string> types;
  const Json others = assertions_of(s, {"enum", "const"});
  for (const auto& [k, v] : others.items()) {
    if (k != "type") error(path, "'enum'/'const' together with '" + k + "' is not supported");
    if (v.is_string()) types.push_back(v);
    else if (v.is_array()) for (const Json& t : v) types.push_back(t.is_string() ? t.get<std::string>() : "");
  }
  std::vector<ExprPtr> alts;
  std::set<std::string> seen;
  for (const Json& v : values) {
    bool ok = types.empty();
    for (const auto& t : types) ok = ok || has_type(v, t);
    const std::string text = json_canonical(v);
    if (ok && seen.insert(text).second) alts.push_back(literal(text));
  }
  return alt(std::move(alts));
}

ExprPtr SchemaCompiler::compile_types(const Json& s, const std::string& path) {
  std::vector<std::string> types;
  if (s.contains("type")) {
    const Json& t = s["type"];
    if (t.is_string()) {
      types.push_back(t);
    } else if (t.is_array() && !t.empty()) {
      for (const Json& x : t) {
        if (!x.is_string()) error(path + "/type", "'type' entries must be strings");
        types.push_back(x);
      }
    } else {
      error(path + "/type", "'type' must be a string or a non-empty array of strings");
    }
  } else {
    types = {"null", "boolean", "object", "array", "number", "string"};
  }
  const bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
  std::vector<ExprPtr> alts;
  std::set<std::string> done;
  for (const std::string& t : types) {
    if (!done.insert(t).second) continue;
    if (t == "null") alts.push_back(pieces_.null());
    else if (t == "boolean") alts.push_back(pieces_.boolean());
    else if (t == "string") alts.push_back(compile_string(s, path));
    else if (t == "integer") { if (!has_number) alts.push_back(compile_integer(s, path)); }
    else if (t == "number") alts.push_back(compile_number(s, path));
    else if (t == "object") alts.push_back(compile_object(s, path));
    else if (t == "array") alts.push_back(compile_array(s, path));
    else error(path + "/type", "unknown type '" + t + "'");
  }
  return alt(std::move(alts));
}

ExprPtr SchemaCompiler::compile_string(const Json& s, const std::string& path) {
  const bool lengths = s.contains("minLength") || s.contains("maxLength");
  const uint32_t lo = count_of(s, "minLength", path);
  const uint32_t hi = s.contains("maxLength") ? count_of(s, "maxLength", path) : Expr::kUnbounded;
  const CharEncoder encode = [this](const CodepointSet& set) { return pieces_.string_char(set); };
  if (s.contains("format")) {
    if (!s["format"].is_string()) error(path + "/format", "'format' must be a string");
    const std::string f = s["format"];
    const char* re = format_regex(f);
    if (!re) error(path + "/format", "unsupported format '" + f + "'");
    if (lengths || s.contains("pattern"))
      error(path, "'format' together with 'pattern', 'minLength' or 'maxLength' is not supported");
    return seq({literal("\""), regex_expr(re, RegexAnchoring::kFullMatch, encode), literal("\"")});
  }
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) error(path + "/pattern", "'pattern' must be a string");
    if (lengths) error(path, "'pattern' together with 'minLength' or 'maxLength' is not supported");
    try {
      return seq({literal("\""), regex_expr(s["pattern"].get<std::string>(), RegexAnchoring::kSearch, encode),
                  literal("\"")});
    } catch (const Error& e) {
      error(path + "/pattern", e.what());
    }
  }
  if (!lengths) return pieces_.any_string();
  return seq({literal("\""), repeat(pieces_.any_char(), lo, hi), literal("\"")});
}

ExprPtr SchemaCompiler::compile_integer(const Json& s, const std::string& path) {
  std::optional<int64_t> lo, hi;
  constexpr double kLimit = 9.0e18;
  auto bound = [&](const char* key, bool lower, bool exclusive) {
    if (!s.contains(key)) return;
    const Json& v = s[key];
    if (!v.is_number()) error(path + "/" + key, std::string("'") + key + "' must be a number");
    const double d = v.get<double>();
    if (lower) {
      double b = exclusive ? std::floor(d) + 1 : std::ceil(d);
      if (v.is_number_integer()) b = static_cast<double>(v.get<int64_t>() + (exclusive ? 1 : 0));
      if (b > kLimit) error(path + "/" + key, "bound beyond 9e18 is not supported");
      if (b >= -kLimit) {
        const int64_t x = v.is_number_integer() ? v.get<int64_t>() + (exclusive ? 1 : 0) : static_cast<int64_t>(b);
        lo = lo ? std::max(*lo, x) : x;
      }
    } else {
      double b = exclusive ? std::ceil(d) - 1 : std::floor(d);
      if (b < -kLimit) error(path + "/" + key, "bound beyond -9e18 is not supported");
      if (b <= kLimit) {
        const int64_t x = v.is_number_integer() ? v.get<int64_t>() - (exclusive ? 1 : 0) : static_cast<int64_t>(b);
        hi = hi ? std::min(*hi, x) : x;
      }
    }
  };
  bound("minimum", true, false);
  bound("exclusiveMinimum", true, true);
  bound("maximum", false, false);
  bound("exclusiveMaximum", false, true);
  if (!lo && !hi) return pieces_.integer();
  return pieces_.integer_range(lo, hi);
}

ExprPtr SchemaCompiler::compile_number(const Json& s, const std::string& path) {
  for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
    if (s.contains(k))
      error(path + "/" + k, std::string("'") + k +
                                "' on a number that may be fractional is not supported (bounds are "
                                "supported with \"type\": \"integer\")");
  return pieces_.number();
}

Grammar compile_json_schema(std::string_view schema_json, const JsonSchemaOptions& options) {
  Json root;
  try {
    root = Json::parse(schema_json);
  } catch (const std::exception& e) {
    fail("json schema: not valid JSON: ", e.what());
  }
  if (options.max_whitespace < 0 || options.max_whitespace > 64)
    fail("json schema: max_whitespace must be in [0, 64]");
  GrammarBuilder b;
  const uint32_t top = b.add_rule("root");
  SchemaCompiler compiler(root, options, b);
  b.define(top, compiler.compile(root, ""));
  return b.build(top);
}

}  // namespace lockstep::constraints
