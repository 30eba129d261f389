// JSON Schema compiler: objects (properties, required, additionalProperties) and arrays
// (items, prefixItems, additionalItems, minItems, maxItems).
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "constraints/json_schema_compiler.h"
#include "core/utf8.h"

namespace lockstep::constraints {

namespace {

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

// A trie over the code points of the declared names, for keys that must differ from them all.
struct NameTrie {
  bool terminal = false;
  std::map<char32_t, NameTrie> next;
};

}  // namespace

// A quoted key that is none of `names`: at each trie node the key may end (unless a name ends
// there), continue along a name, or leave every name with another character.
ExprPtr SchemaCompiler::key_excluding(const std::vector<std::string>& names) {
  if (names.empty()) return pieces_.any_string();
  NameTrie root;
  for (const std::string& n : names) {
    NameTrie* t = &root;
    for (size_t i = 0; i < n.size();) t = &t->next[utf8::next(n, i)];
    t->terminal = true;
  }
  const ExprPtr free_rest = seq({repeat(pieces_.any_char(), 0, Expr::kUnbounded), literal("\"")});
  std::function<ExprPtr(const NameTrie&)> from = [&](const NameTrie& t) {
    std::vector<ExprPtr> alts;
    if (!t.terminal) alts.push_back(literal("\""));
    CodepointSet used;
    for (const auto& [c, child] : t.next) {
      used.add(c, c);
      alts.push_back(seq({pieces_.string_char(CodepointSet::single(c)), from(child)}));
    }
    alts.push_back(seq({pieces_.string_char(used.complement()), free_rest}));
    return alt(std::move(alts));
  };
  return seq({literal("\""), from(root)});
}

ExprPtr SchemaCompiler::compile_object(const Json& s, const std::string& path) {
  struct Prop {
    std::string name;
    Json schema;
    bool required;
  };
  std::vector<Prop> props;
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) error(path + "/required", "'required' must be an array of strings");
    for (const Json& r : s["required"]) {
      if (!r.is_string()) error(path + "/required", "'required' must be an array of strings");
      required.insert(r.get<std::string>());
    }
  }
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) error(path + "/properties", "'properties' must be an object");
    for (const auto& [name, schema] : s["properties"].items())
      props.push_back({name, schema, required.count(name) != 0});
  }
  const Json additional = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
  const bool closed = additional.is_boolean() && !additional.get<bool>();
  std::vector<std::string> names;
  for (const Prop& p : props) names.push_back(p.name);
  // Required keys without a declared schema take additionalProperties' schema, after the others.
  for (const std::string& r : required) {
    if (std::find(names.begin(), names.end(), r) != names.end()) continue;
    if (closed) return never();
    props.push_back({r, additional, true});
  }
  names.clear();
  for (const Prop& p : props) names.push_back(p.name);

  const ExprPtr sep = seq({pieces_.ws(), literal(","), pieces_.ws()});
  auto member = [&](ExprPtr key, ExprPtr value) {
    return seq({std::move(key), pieces_.ws(), literal(":"), pieces_.ws(), std::move(value)});
  };
  // The members after the declared ones: other keys, with additionalProperties' schema.
  ExprPtr tail_first = empty(), tail_more = empty();
  if (!closed) {
    const ExprPtr value = compile(additional, path + "/additionalProperties");
    const ExprPtr extra = member(key_excluding(names), value);
    const ExprPtr more = repeat(seq({sep, extra}), 0, Expr::kUnbounded);
    tail_first = optional(seq({extra, more}));
    tail_more = more;
  }
  // chain[i][first]: the members from declared property i on; `first`: nothing emitted yet, so
  // no separator before the next member. Each is a rule, so the chain stays linear in size.
  const std::string base = "obj" + std::to_string(++helper_rules_);
  ExprPtr next_first = tail_first, next_more = tail_more;
  for (size_t i = props.size(); i-- > 0;) {
    const Prop& p = props[i];
    const bool declared = s.contains("properties") && s["properties"].contains(p.name);
    const ExprPtr value = compile(p.schema, declared ? path + "/properties/" + pointer_token(p.name)
                                                     : path + "/additionalProperties");
    const ExprPtr kv = member(pieces_.string_literal(p.name), value);
    ExprPtr chain[2];
    for (int first = 0; first < 2; ++first) {
      ExprPtr emit = seq({first ? empty() : sep, kv, next_more});
      ExprPtr body = p.required ? emit : alt({emit, first ? next_first : next_more});
      const uint32_t r = b_.add_rule(base + "-" + std::to_string(i) + (first ? "f" : "m"));
      b_.define(r, body);
      chain[first] = ref(r);
    }
    next_first = chain[1];
    next_more = chain[0];
  }
  return seq({literal("{"), pieces_.ws(), next_first, pieces_.ws(), literal("}")});
}

ExprPtr SchemaCompiler::compile_array(const Json& s, const std::string& path) {
  std::vector<Json> prefix;
  std::string prefix_key;
  Json rest = true;
  std::string rest_path = path + "/items";
  if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array()) error(path + "/prefixItems", "'prefixItems' must be an array");
    if (s.contains("items") && s["items"].is_array())
      error(path + "/items", "'items' as an array together with 'prefixItems'");
    if (s.contains("additionalItems")) error(path, "unsupported keyword 'additionalItems' with 'prefixItems'");
    prefix.assign(s["prefixItems"].begin(), s["prefixItems"].end());
    prefix_key = "prefixItems";
    if (s.contains("items")) rest = s["items"];
  } else if (s.contains("items") && s["items"].is_array()) {
    prefix.assign(s["items"].begin(), s["items"].end());
    prefix_key = "items";
    if (s.contains("additionalItems")) rest = s["additionalItems"];
    rest_path = path + "/additionalItems";
  } else if (s.contains("items")) {
    rest = s["items"];
  }
  if (s.contains("uniqueItems") && !(s["uniqueItems"].is_boolean() && !s["uniqueItems"].get<bool>()))
    error(path, "unsupported keyword 'uniqueItems' (true)");
  const uint32_t lo = count_of(s, "minItems", path);
  const uint32_t hi = s.contains("maxItems") ? count_of(s, "maxItems", path) : Expr::kUnbounded;
  const uint32_t k = static_cast<uint32_t>(prefix.size());
  const ExprPtr sep = seq({pieces_.ws(), literal(","), pieces_.ws()});
  const ExprPtr item = compile(rest, rest_path);

  // After the prefix: the remaining items, all of the `items` schema.
  ExprPtr after;
  const uint32_t rest_lo = lo > k ? lo - k : 0;
  const uint32_t rest_hi = hi == Expr::kUnbounded ? hi : (hi > k ? hi - k : 0);
  if (k == 0) {
    const ExprPtr body = seq({item, repeat(seq({sep, item}), rest_lo > 0 ? rest_lo - 1 : 0,
                                           rest_hi == Expr::kUnbounded ? rest_hi : rest_hi - 1)});
    after = rest_hi == 0 ? (rest_lo == 0 ? empty() : never()) : rest_lo == 0 ? optional(body) : body;
  } else {
    after = repeat(seq({sep, item}), rest_lo, rest_hi);
  }
  // Prefix positions from the last back: at j the array may end (when j >= minItems) or, below
  // maxItems, take prefix item j.
  const std::string base = "arr" + std::to_string(++helper_rules_);
  ExprPtr next = after;
  for (uint32_t j = k; j-- > 0;) {
    std::vector<ExprPtr> alts;
    if (j >= lo) alts.push_back(empty());
    if (j < hi)
      alts.push_back(seq({j == 0 ? empty() : sep,
                          compile(prefix[j], path + "/" + prefix_key + "/" + std::to_string(j)), next}));
    const uint32_t r = b_.add_rule(base + "-" + std::to_string(j));
    b_.define(r, alt(std::move(alts)));
    next = ref(r);
  }
  return seq({literal("["), pieces_.ws(), next, pieces_.ws(), literal("]")});
}

}  // namespace lockstep::constraints
