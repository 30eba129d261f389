#include "server/tools/call_grammar.h"

#include <algorithm>
#include <map>

#include "constraints/json_schema_compiler.h"
#include "core/error.h"

namespace lockstep::server::tools {

namespace {

namespace c = lockstep::constraints;

// Up to one whitespace character wherever JSON allows it: real models write `{"a": 1}` (the
// templates' tojson spacing), and the bound keeps a small model from padding forever.
c::JsonSchemaOptions json_options() {
  c::JsonSchemaOptions o;
  o.max_whitespace = 1;
  o.one_of_as_any_of = true;  // a tool schema's oneOf is a choice, not an exclusivity proof
  return o;
}

// A string parameter written raw (Qwen3-Coder values, Gemma 4 strings): characters other than
// '<', so it cannot run into the closing markup, between the schema's minLength and maxLength.
c::ExprPtr free_text(const Json& schema) {
  auto bound = [&](const char* key, uint32_t dflt) {
    auto v = schema.find(key);
    if (v == schema.end()) return dflt;
    if (!v->is_number_unsigned() && !(v->is_number_integer() && v->get<int64_t>() >= 0))
      throw Error(std::string("json schema: ") + key + " must be a non-negative integer");
    return static_cast<uint32_t>(std::min<uint64_t>(v->get<uint64_t>(), 1u << 20));
  };
  const uint32_t lo = bound("minLength", 0), hi = bound("maxLength", c::Expr::kUnbounded);
  if (lo > hi) throw Error("json schema: minLength is above maxLength");
  const c::ExprPtr ch = c::codepoints(c::CodepointSet::all_scalar_values().minus(c::CodepointSet::single('<')));
  return c::repeat(ch, lo, hi);
}

const Json& properties_of(const Json& schema) {
  static const Json none = Json::object();
  auto p = schema.find("properties");
  return p != schema.end() && p->is_object() ? *p : none;
}

bool is_required(const Json& schema, const std::string& key) {
  auto r = schema.find("required");
  if (r == schema.end() || !r->is_array()) return false;
  for (const auto& k : *r)
    if (k == key) return true;
  return false;
}

bool string_typed(const Json& s) {
  auto t = s.find("type");
  return t != s.end() && t->is_string() && *t == "string";
}

class CallGrammar {
 public:
  CallGrammar(ToolFamily family, c::GrammarBuilder& b) : family_(family), b_(b) {}

  c::ExprPtr call(const ToolSpec& t) {
    const std::string where = "tool \"" + t.name + "\" parameters";
    try {
      switch (family_) {
        case ToolFamily::kHermes:
          return c::seq({c::literal("<tool_call>\n{\"name\": \"" + t.name + "\", \"arguments\": "), json_args(t),
                         c::literal("}\n</tool_call>")});
        case ToolFamily::kLlama3:
          return c::seq({c::literal("{\"name\": \"" + t.name + "\", \"parameters\": "), json_args(t), c::literal("}")});
        case ToolFamily::kMistralJson:
          return c::seq({c::literal("{\"name\": \"" + t.name + "\", \"arguments\": "), json_args(t), c::literal("}")});
        case ToolFamily::kMistralArgs:
          return c::seq({c::literal("[TOOL_CALLS]" + t.name + "[ARGS]"), json_args(t)});
        case ToolFamily::kQwenXml:
          return c::seq({c::literal("<tool_call>\n<function=" + t.name + ">\n"), xml_params(t),
                         c::literal("</function>\n</tool_call>")});
        case ToolFamily::kGemma4:
          return c::seq({c::literal("<|tool_call>call:" + t.name), gemma_object(t.parameters, t.parameters, "", 0),
                         c::literal("<tool_call|>")});
      }
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    return c::never();
  }

 private:
  // The arguments object as JSON valid under the tool's schema ({} schemas: any object).
  c::ExprPtr json_args(const ToolSpec& t) {
    Json schema = t.parameters;
    if (!schema.contains("type")) schema["type"] = "object";
    c::SchemaCompiler compiler(schema, json_options(), b_);
    return compiler.compile(schema, "");
  }

  c::ExprPtr json_value(const Json& root, const Json& schema, const std::string& path) {
    c::SchemaCompiler compiler(root, json_options(), b_);
    return compiler.compile(schema, path);
  }

  // <parameter=k>\nVALUE\n</parameter>\n for each property in schema order, the optional ones
  // optional; strings as free text, other values as JSON.
  c::ExprPtr xml_params(const ToolSpec& t) {
    std::vector<c::ExprPtr> items;
    for (const auto& [key, prop] : properties_of(t.parameters).items()) {
      // The parser keeps a string parameter's text as it is, so its enum values are unquoted.
      c::ExprPtr value = string_typed(prop) ? raw_string(prop) : json_value(t.parameters, prop, "/properties/" + key);
      c::ExprPtr param = c::seq({c::literal("<parameter=" + key + ">\n"), value, c::literal("\n</parameter>\n")});
      items.push_back(is_required(t.parameters, key) ? param : c::optional(param));
    }
    return c::seq(std::move(items));
  }

  c::ExprPtr raw_string(const Json& s) {
    std::vector<c::ExprPtr> alts;
    if (auto e = s.find("enum"); e != s.end() && e->is_array())
      for (const auto& v : *e)
        if (v.is_string()) alts.push_back(c::literal(v.get<std::string>()));
    if (auto k = s.find("const"); k != s.end() && k->is_string()) alts.push_back(c::literal(k->get<std::string>()));
    return alts.empty() ? free_text(s) : c::alt(std::move(alts));
  }

  // Gemma 4's notation: {k:v,...} with bare keys, <|"|>-quoted strings, [v,...] arrays;
  // numbers, booleans and null as JSON.
  c::ExprPtr gemma_value(const Json& root, const Json& s, const std::string& path, int depth) {
    if (depth > 16) throw Error("json schema at " + path + ": nested too deep for a call grammar");
    if (s.contains("$ref") || s.contains("anyOf") || s.contains("oneOf") || s.contains("allOf"))
      throw Error("json schema at " + path + ": $ref/anyOf/oneOf/allOf are not supported in Gemma 4 call arguments");
    auto t = s.find("type");
    const std::string type = t != s.end() && t->is_string() ? t->get<std::string>() : "";
    if (s.contains("enum") && type == "string") {
      std::vector<c::ExprPtr> alts;
      for (const auto& v : s["enum"])
        if (v.is_string()) alts.push_back(c::literal("<|\"|>" + v.get<std::string>() + "<|\"|>"));
      return c::alt(std::move(alts));
    }
    if (type == "string") return c::seq({c::literal("<|\"|>"), free_text(s), c::literal("<|\"|>")});
    if (type == "object") return gemma_object(root, s, path, depth);
    if (type == "array") {
      auto items = s.find("items");
      if (items == s.end() || !items->is_object()) return c::literal("[]");
      const uint32_t rule = b_.add_rule("gemma-array");
      c::ExprPtr item = gemma_value(root, *items, path + "/items", depth + 1);
      b_.define(rule, c::seq({c::literal("["), c::optional(c::seq({item, c::repeat(c::seq({c::literal(","), item}), 0,
                                                                                  c::Expr::kUnbounded)})),
                              c::literal("]")}));
      return c::ref(rule);
    }
    if (type.empty()) throw Error("json schema at " + path + ": a Gemma 4 call argument needs a \"type\"");
    return json_value(root, s, path);  // number, integer, boolean, null: the same text as JSON
  }

  // The properties in schema order, required ones present, commas between the present ones.
  // rest(i, comma) is a rule: "the properties from i on, a comma first if any is written".
  c::ExprPtr gemma_object(const Json& root, const Json& s, const std::string& path, int depth) {
    std::vector<std::pair<std::string, const Json*>> props;
    for (const auto& [k, v] : properties_of(s).items()) props.emplace_back(k, &v);
    std::vector<c::ExprPtr> pairs;
    for (const auto& [k, v] : props)
      pairs.push_back(c::seq({c::literal(k + ":"), gemma_value(root, *v, path + "/properties/" + k, depth + 1)}));
    const size_t n = props.size();
    std::vector<uint32_t> rest(2 * (n + 1));
    for (auto& r : rest) r = b_.add_rule("gemma-args");
    for (size_t i = n + 1; i-- > 0;) {
      for (int comma = 0; comma < 2; ++comma) {
        const uint32_t r = rest[2 * i + comma];
        if (i == n) {
          b_.define(r, c::empty());
          continue;
        }
        c::ExprPtr take = c::seq({comma ? c::literal(",") : c::empty(), pairs[i], c::ref(rest[2 * (i + 1) + 1])});
        b_.define(r, is_required(s, props[i].first) ? take : c::alt({take, c::ref(rest[2 * (i + 1) + comma])}));
      }
    }
    return c::seq({c::literal("{"), c::ref(rest[0]), c::literal("}")});
  }

  ToolFamily family_;
  c::GrammarBuilder& b_;
};

}  // namespace

constraints::Grammar tool_call_grammar(ToolFamily family, const ToolList& tools, bool several) {
  c::GrammarBuilder b;
  const uint32_t root = b.add_rule("root");
  const uint32_t one = b.add_rule("call");
  CallGrammar g(family, b);
  std::vector<c::ExprPtr> alts;
  for (const auto& t : tools) alts.push_back(g.call(t));
  b.define(one, c::alt(std::move(alts)));
  const c::ExprPtr call = c::ref(one);
  // Llama 3.1's templates know no parallel calls: always one.
  if (family == ToolFamily::kLlama3) several = false;
  const char* sep = family == ToolFamily::kMistralJson ? ", " : family == ToolFamily::kMistralArgs || family == ToolFamily::kGemma4 ? "" : "\n";
  c::ExprPtr calls = several ? c::seq({call, c::repeat(c::seq({c::literal(sep), call}), 0, c::Expr::kUnbounded)}) : call;
  if (family == ToolFamily::kMistralJson) calls = c::seq({c::literal("[TOOL_CALLS]["), calls, c::literal("]")});
  b.define(root, calls);
  return b.build(root);
}

}  // namespace lockstep::server::tools
