// JSON Schema compiler: allOf as one merged schema, and the proof oneOf needs that its branches
// exclude each other.
#include <algorithm>
#include <cmath>
#include <set>

#include "constraints/json_schema_compiler.h"
#include "core/error.h"

namespace lockstep::constraints {

namespace {

constexpr int kMaxDepth = 32;
constexpr uint32_t kNull = 1, kBool = 2, kObject = 4, kArray = 8, kInteger = 16, kFraction = 32,
                   kString = 64, kAll = 127;

uint32_t type_bits(const std::string& t) {
  if (t == "null") return kNull;
  if (t == "boolean") return kBool;
  if (t == "object") return kObject;
  if (t == "array") return kArray;
  if (t == "integer") return kInteger;
  if (t == "number") return kInteger | kFraction;
  if (t == "string") return kString;
  return 0;
}

uint32_t value_bits(const Json& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBool;
  if (v.is_object()) return kObject;
  if (v.is_array()) return kArray;
  if (v.is_string()) return kString;
  if (v.is_number_integer()) return kInteger;
  const double d = v.get<double>();
  return std::isfinite(d) && d == std::floor(d) ? kInteger : kFraction;
}

std::vector<std::string> type_names(const Json& t) {
  if (t.is_string()) return {t.get<std::string>()};
  std::vector<std::string> out;
  if (t.is_array())
    for (const Json& x : t)
      if (x.is_string()) out.push_back(x);
  return out;
}

// The canonical texts of the values an enum/const schema admits; nullopt when not one.
std::optional<std::set<std::string>> value_set(const Json& s) {
  if (!s.is_object() || (!s.contains("enum") && !s.contains("const"))) return std::nullopt;
  std::set<std::string> out;
  if (s.contains("const")) {
    out.insert(json_canonical(s["const"]));
    return out;
  }
  if (s["enum"].is_array())
    for (const Json& v : s["enum"]) out.insert(json_canonical(v));
  return out;
}

bool disjoint(const std::set<std::string>& a, const std::set<std::string>& b) {
  for (const auto& x : a)
    if (b.count(x)) return false;
  return true;
}

}  // namespace

Json SchemaCompiler::resolve_top(const Json& s, const std::string& path, int depth) const {
  if (!s.is_object() || !s.contains("$ref")) return s;
  if (depth > kMaxDepth) error(path, "'$ref' chain too deep to merge");
  if (!s["$ref"].is_string()) error(path + "/$ref", "'$ref' must be a string");
  const Json& target = resolve(s["$ref"], path);
  const Json rest = assertions_of(s, {"$ref"});
  if (draft7_ || rest.empty()) return resolve_top(target, path, depth + 1);
  return merge({target, rest}, path, depth + 1);
}

Json SchemaCompiler::merge(const std::vector<Json>& schemas, const std::string& path, int depth) const {
  if (depth > kMaxDepth) error(path, "'allOf' nested too deep to merge");
  // Flatten: references resolved, nested allOf spliced in, true dropped; false wins.
  std::vector<Json> parts;
  std::vector<Json> todo(schemas.rbegin(), schemas.rend());
  while (!todo.empty()) {
    Json s = resolve_top(todo.back(), path, depth + 1);
    todo.pop_back();
    if (s.is_boolean()) {
      if (!s.get<bool>()) return false;
      continue;
    }
    if (!s.is_object()) error(path, "a schema must be an object or a boolean");
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array()) error(path + "/allOf", "'allOf' must be an array");
      todo.push_back(assertions_of(s, {"allOf"}));
      for (auto it = s["allOf"].rbegin(); it != s["allOf"].rend(); ++it) todo.push_back(*it);
      continue;
    }
    parts.push_back(assertions_of(s));
  }
  Json out = Json::object();
  for (const Json& s : parts) {
    for (const auto& [k, v] : s.items()) {
      if (!out.contains(k)) {
        out[k] = v;
        continue;
      }
      Json& cur = out[k];
      if (cur == v) continue;
      if (k == "type") {
        std::vector<std::string> kept;
        for (const auto& a : type_names(cur))
          for (const auto& b : type_names(v)) {
            const uint32_t both = type_bits(a) & type_bits(b);
            if (both == kInteger) kept.push_back("integer");
            else if (both) kept.push_back(a);
          }
        if (kept.empty()) return false;
        cur = Json(kept);
      } else if (k == "required") {
        for (const Json& r : v)
          if (std::find(cur.begin(), cur.end(), r) == cur.end()) cur.push_back(r);
      } else if (k == "properties") {
        for (const auto& [name, schema] : v.items())
          cur[name] = cur.contains(name) ? Json{{"allOf", Json::array({cur[name], schema})}} : schema;
      } else if (k == "minLength" || k == "minItems" || k == "minimum" || k == "exclusiveMinimum") {
        if (v.get<double>() > cur.get<double>()) cur = v;
      } else if (k == "maxLength" || k == "maxItems" || k == "maximum" || k == "exclusiveMaximum") {
        if (v.get<double>() < cur.get<double>()) cur = v;
      } else if (k == "enum") {
        Json kept = Json::array();
        for (const Json& a : cur)
          for (const Json& b : v)
            if (json_canonical(a) == json_canonical(b)) kept.push_back(a);
        cur = kept;
      } else if (k == "const") {
        if (json_canonical(cur) != json_canonical(v)) return false;
      } else if (k == "items" && !cur.is_array() && !v.is_array()) {
        cur = Json{{"allOf", Json::array({cur, v})}};
      } else if (k == "additionalProperties") {
        cur = Json{{"allOf", Json::array({cur, v})}};
      } else if (k == "anyOf") {
        Json product = Json::array();
        for (const Json& a : cur)
          for (const Json& b : v) product.push_back(Json{{"allOf", Json::array({a, b})}});
        if (product.size() > 64) error(path + "/allOf", "merging 'anyOf' lists gives more than 64 branches");
        cur = product;
      } else {
        error(path + "/allOf", "cannot merge two different '" + k + "' values");
      }
    }
  }
  // additionalProperties of a part applies to the keys that part does not declare, which may be
  // declared by another part: such a property takes both schemas.
  if (out.contains("properties")) {
    for (const Json& s : parts) {
      if (!s.contains("additionalProperties")) continue;
      for (auto& [name, schema] : out["properties"].items()) {
        const bool own = s.contains("properties") && s["properties"].contains(name);
        if (!own) schema = Json{{"allOf", Json::array({schema, s["additionalProperties"]})}};
      }
    }
  }
  return out;
}

uint32_t SchemaCompiler::type_set(const Json& schema, const std::string& path, int depth) const {
  if (depth > kMaxDepth) return kAll;
  const Json s = resolve_top(schema, path, depth);
  if (s.is_boolean()) return s.get<bool>() ? kAll : 0;
  if (!s.is_object()) return kAll;
  uint32_t bits = kAll;
  if (s.contains("type")) {
    uint32_t t = 0;
    for (const auto& n : type_names(s["type"])) t |= type_bits(n);
    bits &= t;
  }
  if (s.contains("const")) bits &= value_bits(s["const"]);
  if (s.contains("enum") && s["enum"].is_array()) {
    uint32_t t = 0;
    for (const Json& v : s["enum"]) t |= value_bits(v);
    bits &= t;
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key) || !s[key].is_array()) continue;
    uint32_t t = 0;
    for (const Json& b : s[key]) t |= type_set(b, path, depth + 1);
    bits &= t;
  }
  if (s.contains("allOf") && s["allOf"].is_array())
    for (const Json& b : s["allOf"]) bits &= type_set(b, path, depth + 1);
  return bits;
}

void SchemaCompiler::require_exclusive(const std::vector<Json>& branches, const std::string& path) const {
  auto exclusive = [&](const Json& a0, const Json& b0) {
    const Json a = resolve_top(a0, path, 0), b = resolve_top(b0, path, 0);
    if ((type_set(a, path, 0) & type_set(b, path, 0)) == 0) return true;
    const auto va = value_set(a), vb = value_set(b);
    if (va && vb && disjoint(*va, *vb)) return true;
    // A discriminator: a property both require, with disjoint const/enum values.
    if (a.is_object() && b.is_object() && a.contains("required") && b.contains("required") &&
        a.contains("properties") && b.contains("properties")) {
      for (const Json& r : a["required"]) {
        if (!r.is_string() || std::find(b["required"].begin(), b["required"].end(), r) == b["required"].end())
          continue;
        const std::string name = r;
        if (!a["properties"].contains(name) || !b["properties"].contains(name)) continue;
        const auto pa = value_set(resolve_top(a["properties"][name], path, 0));
        const auto pb = value_set(resolve_top(b["properties"][name], path, 0));
        if (pa && pb && disjoint(*pa, *pb)) return true;
      }
    }
    return false;
  };
  for (size_t i = 0; i < branches.size(); ++i)
    for (size_t j = i + 1; j < branches.size(); ++j)
      if (!exclusive(branches[i], branches[j]))
        error(path, "branches " + std::to_string(i) + " and " + std::to_string(j) +
                        " may both match, and 'oneOf' requires exactly one: only branches that "
                        "provably exclude each other are supported (different types, distinct "
                        "const/enum values, or a required property with distinct const values)");
}

}  // namespace lockstep::constraints
