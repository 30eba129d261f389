#include "server/structured_output.h"

#include "core/error.h"
#include "server/api_error.h"
#include "server/constraint_cache.h"

namespace lockstep::server {

namespace {

constexpr const char* kTypes = "text, json_object, json_schema, regex or grammar";

// A required non-empty string member of response_format (regex, grammar).
std::string required_string(const Body& rf, const char* key) {
  const std::string field = std::string("response_format.") + key;
  if (!has(rf, key)) bad_field(field, "required for type \"" + std::string(key) + "\"", "missing_required_parameter");
  const Body& v = rf.at(key);
  if (!v.is_string()) bad_field(field, "expected a string, got " + json_kind(v), "invalid_type");
  if (v.get_ref<const std::string&>().empty()) bad_field(field, "empty", "invalid_value");
  return v.get<std::string>();
}

ResponseFormat json_schema_format(const Body& rf) {
  const char* js_field = "response_format.json_schema";
  if (!has(rf, "json_schema")) bad_field(js_field, "required for type \"json_schema\"", "missing_required_parameter");
  const Body& js = rf.at("json_schema");
  if (!js.is_object()) bad_field(js_field, "expected an object, got " + json_kind(js), "invalid_type");
  if (has(js, "name") && !js.at("name").is_string())
    bad_field("response_format.json_schema.name", "expected a string, got " + json_kind(js.at("name")),
              "invalid_type");
  if (has(js, "description") && !js.at("description").is_string())
    bad_field("response_format.json_schema.description",
              "expected a string, got " + json_kind(js.at("description")), "invalid_type");
  // strict is accepted either way: the output is always held to the whole schema.
  if (has(js, "strict") && !js.at("strict").is_boolean())
    bad_field("response_format.json_schema.strict", "expected a boolean, got " + json_kind(js.at("strict")),
              "invalid_type");
  const char* schema_field = "response_format.json_schema.schema";
  if (!has(js, "schema")) bad_field(schema_field, "required (a JSON Schema object)", "missing_required_parameter");
  const Body& schema = js.at("schema");
  if (!schema.is_object() && !schema.is_boolean())
    bad_field(schema_field, "expected a JSON Schema (an object or a boolean), got " + json_kind(schema),
              "invalid_type");
  // The dump is canonical for the cache: the same schema sent with other spacing shares an entry.
  return {constraints::ConstraintSpec::json_schema(schema.dump()), schema_field};
}

}  // namespace

std::optional<ResponseFormat> parse_response_format(const Body& body) {
  if (!has(body, "response_format")) return std::nullopt;
  const Body& rf = body.at("response_format");
  if (!rf.is_object()) bad_field("response_format", "expected an object, got " + json_kind(rf), "invalid_type");
  if (!has(rf, "type")) bad_field("response_format.type", std::string("required (") + kTypes + ")",
                                  "missing_required_parameter");
  if (!rf.at("type").is_string())
    bad_field("response_format.type", "expected a string, got " + json_kind(rf.at("type")), "invalid_type");
  const std::string type = rf.at("type").get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return ResponseFormat{constraints::ConstraintSpec::json_object(), "response_format"};
  if (type == "json_schema") return json_schema_format(rf);
  if (type == "regex")
    return ResponseFormat{constraints::ConstraintSpec::regex(required_string(rf, "regex")), "response_format.regex"};
  if (type == "grammar")
    return ResponseFormat{constraints::ConstraintSpec::gbnf(required_string(rf, "grammar")),
                          "response_format.grammar"};
  bad_field("response_format.type", "unknown type \"" + type + "\" (expected " + kTypes + ")", "invalid_value");
}

std::shared_ptr<const constraints::Constraint> compile_response_format(const ResponseFormat& f,
                                                                      const ServingContext& ctx,
                                                                      bool with_eos) {
  if (!ctx.tokenizer || !ctx.constraints)
    bad_field("response_format", "constraints need the model's tokenizer.json (they match the text tokens spell)",
              "no_tokenizer");
  try {
    return ctx.constraints->get(f.spec, with_eos);
  } catch (const Error& e) {
    bad_field(f.field, e.what(), "invalid_response_format");
  }
}

}  // namespace lockstep::server
