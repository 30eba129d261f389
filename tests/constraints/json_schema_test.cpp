// JSON Schema compiler: the output form, keywords the suite covers thinly, and errors.
#include "constraints/json_schema.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"

namespace lockstep::constraints {
namespace {

using testing::matches;

Grammar schema(std::string_view text, JsonSchemaOptions o = {}) { return compile_json_schema(text, o); }

std::string error_of(std::string_view text) {
  try {
    schema(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonSchema, PropertiesInSchemaOrderOptionalAndAdditional) {
  const Grammar g = schema(R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}},
                               "required":["a"],"additionalProperties":{"type":"boolean"}})");
  EXPECT_TRUE(matches(g, R"({"a":"x"})"));
  EXPECT_TRUE(matches(g, R"({"b":1,"a":"x"})"));
  EXPECT_TRUE(matches(g, R"({"b":1,"a":"x","ab":true,"c":false})"));
  EXPECT_FALSE(matches(g, R"({"a":"x","b":1})"));   // declared members in schema order
  EXPECT_FALSE(matches(g, R"({"b":1})"));           // a is required
  EXPECT_FALSE(matches(g, R"({"a":"x","c":1})"));   // additional values are booleans
  EXPECT_FALSE(matches(g, R"({"a":"x","a":"y"})")); // an extra key may not repeat a declared one
  EXPECT_FALSE(matches(g, R"({"a": "x"})"));        // compact by default
}

TEST(JsonSchema, BoundedWhitespace) {
  JsonSchemaOptions o;
  o.max_whitespace = 2;
  const Grammar g = schema(R"({"type":"array","items":{"type":"integer"}})", o);
  EXPECT_TRUE(matches(g, "[ 1,\n 2 ]"));
  EXPECT_TRUE(matches(g, "[1,2]"));
  EXPECT_FALSE(matches(g, "[   1]"));  // three spaces
}

TEST(JsonSchema, StringsEscapeCanonicallyAndCountCharacters) {
  const Grammar g = schema(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(matches(g, R"("é\n")"));     // two characters, one escaped
  EXPECT_TRUE(matches(g, R"("\"\\\u0001")"));
  EXPECT_FALSE(matches(g, R"("a")"));
  EXPECT_FALSE(matches(g, R"("abcd")"));
  EXPECT_FALSE(matches(g, "\"a\nb\""));     // a raw control character is not JSON
  EXPECT_FALSE(matches(g, R"("\u0041b")")); // printable characters are not escaped
  EXPECT_FALSE(matches(g, R"("\/b")"));
}

TEST(JsonSchema, IntegerRangesAreExact) {
  const Grammar g = schema(R"({"type":"integer","minimum":-12,"exclusiveMaximum":105})");
  for (int v = -30; v <= 130; ++v)
    EXPECT_EQ(matches(g, std::to_string(v)), v >= -12 && v < 105) << v;
  EXPECT_FALSE(matches(g, "007"));
  EXPECT_FALSE(matches(g, "-0"));
  const Grammar above = schema(R"({"type":"integer","minimum":95})");
  EXPECT_TRUE(matches(above, "95"));
  EXPECT_TRUE(matches(above, "123456789"));
  EXPECT_FALSE(matches(above, "94"));
  EXPECT_FALSE(matches(above, "-100"));
}

TEST(JsonSchema, FormatsAndPatterns) {
  const Grammar date = schema(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(matches(date, R"("2024-02-29")"));
  EXPECT_FALSE(matches(date, R"("2023-02-29")"));  // not a leap year
  EXPECT_FALSE(matches(date, R"("1900-02-29")"));
  EXPECT_TRUE(matches(date, R"("2000-02-29")"));
  EXPECT_FALSE(matches(date, R"("2024-04-31")"));
  const Grammar dt = schema(R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(matches(dt, R"("2024-05-06T07:08:09.5+02:00")"));
  EXPECT_FALSE(matches(dt, R"("2024-05-06 07:08:09Z")"));
  const Grammar uuid = schema(R"({"type":"string","format":"uuid"})");
  EXPECT_TRUE(matches(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(matches(uuid, R"("123e4567e89b12d3a456426614174000")"));
  const Grammar email = schema(R"({"type":"string","format":"email"})");
  EXPECT_TRUE(matches(email, R"("ada.l@example.org")"));
  EXPECT_FALSE(matches(email, R"("ada@")"));
  // A pattern's `"` and `\` appear escaped in the JSON text.
  const Grammar quote = schema(R"({"type":"string","pattern":"^a\"\\\\$"})");
  EXPECT_TRUE(matches(quote, R"("a\"\\")"));
  EXPECT_FALSE(matches(quote, R"("a\"")"));
}

TEST(JsonSchema, RecursiveRefsOneOfAndAllOf) {
  const Grammar tree = schema(R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(matches(tree, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4}]}]})"));
  EXPECT_FALSE(matches(tree, R"({"v":1,"kids":[{"w":2}]})"));
  const Grammar tagged = schema(R"({"oneOf":[
      {"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind"]},
      {"type":"object","properties":{"kind":{"const":"b"}},"required":["kind"]}]})");
  EXPECT_TRUE(matches(tagged, R"({"kind":"a","x":1})"));
  EXPECT_TRUE(matches(tagged, R"({"kind":"b"})"));
  const Grammar merged = schema(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
      {"properties":{"a":{"minimum":3}},"additionalProperties":false}]})");
  EXPECT_TRUE(matches(merged, R"({"a":3})"));
  EXPECT_FALSE(matches(merged, R"({"a":2})"));
  EXPECT_FALSE(matches(merged, R"({"a":3,"b":1})"));
}

TEST(JsonSchema, AnyJsonObjectAndValue) {
  const Grammar obj = schema(R"({"type":"object"})");
  EXPECT_TRUE(matches(obj, R"({"a":[1,{"b":null}],"c":"d","e":-1.5e3})"));
  EXPECT_FALSE(matches(obj, R"([1])"));
  EXPECT_FALSE(matches(obj, R"({"a":01})"));
  const Grammar any = schema("true");
  EXPECT_TRUE(matches(any, "false"));
  EXPECT_TRUE(matches(any, R"("x")"));
  EXPECT_FALSE(matches(any, "tru"));
}

TEST(JsonSchema, UnsupportedAndInvalidSchemasNameThePointer) {
  EXPECT_EQ(error_of(R"({"properties":{"a":{"not":{}}}})"), "json schema at #/properties/a: unsupported keyword 'not'");
  EXPECT_EQ(error_of(R"({"type":"array","uniqueItems":true})"), "json schema at #: unsupported keyword 'uniqueItems' (true)");
  EXPECT_EQ(error_of(R"({"type":"strin"})"), "json schema at #/type: unknown type 'strin'");
  EXPECT_EQ(error_of(R"({"$ref":"#/$defs/missing"})"), "json schema at #/$ref: reference '#/$defs/missing' points to nothing");
  EXPECT_EQ(error_of(R"({"$ref":"http://x/y.json"})"),
            "json schema at #/$ref: only local references (\"#...\") are supported, not 'http://x/y.json'");
  EXPECT_NE(error_of(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})").find("may both match"), std::string::npos);
  EXPECT_NE(error_of(R"j({"type":"string","pattern":"(?=a)"})j").find("json schema at #/pattern: regex at offset 0"),
            std::string::npos);
  EXPECT_NE(error_of("false").find(kEmptyLanguage), std::string::npos);
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  // Members that are no JSON Schema keyword are ignored, as the specification says.
  EXPECT_EQ(error_of(R"({"type":"integer","x-note":"fine"})"), "");
}

}  // namespace
}  // namespace lockstep::constraints
