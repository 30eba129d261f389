// response_format parsing (each shape error names its nested field) and the constraint cache
// (one compile per spec, LRU eviction, compile errors surface as 400s naming the field).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "server/api_error.h"
#include "server/constraint_cache.h"
#include "server/structured_output.h"

namespace lockstep::server {
namespace {

using constraints::ConstraintSpec;

ApiError parse_error(const std::string& body) {
  try {
    parse_response_format(Body::parse(body));
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "");
}

TEST(ResponseFormat, TextAndAbsentMeanNoConstraint) {
  EXPECT_FALSE(parse_response_format(Body::parse(R"({})")).has_value());
  EXPECT_FALSE(parse_response_format(Body::parse(R"({"response_format": null})")).has_value());
  EXPECT_FALSE(parse_response_format(Body::parse(R"({"response_format": {"type": "text"}})")).has_value());
}

TEST(ResponseFormat, EachTypeBecomesItsSpec) {
  auto f = parse_response_format(Body::parse(R"({"response_format": {"type": "json_object"}})"));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->spec.kind, ConstraintSpec::Kind::kJsonObject);
  f = parse_response_format(Body::parse(
      R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true,
          "schema": {"type": "object",   "properties": {"a": {"type": "integer"}}}}}})"));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->spec.kind, ConstraintSpec::Kind::kJsonSchema);
  EXPECT_EQ(f->spec.text, R"({"type":"object","properties":{"a":{"type":"integer"}}})");  // canonical
  EXPECT_EQ(f->field, "response_format.json_schema.schema");
  f = parse_response_format(Body::parse(R"({"response_format": {"type": "regex", "regex": "[0-9]+"}})"));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->spec.kind, ConstraintSpec::Kind::kRegex);
  EXPECT_EQ(f->spec.text, "[0-9]+");
  f = parse_response_format(Body::parse(R"({"response_format": {"type": "grammar", "grammar": "root ::= \"a\""}})"));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->spec.kind, ConstraintSpec::Kind::kGbnf);
  EXPECT_EQ(f->field, "response_format.grammar");
}

TEST(ResponseFormat, ShapeErrorsNameTheNestedField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"response_format": "json"})", "response_format"},
      {R"({"response_format": {}})", "response_format.type"},
      {R"({"response_format": {"type": 3}})", "response_format.type"},
      {R"({"response_format": {"type": "xml"}})", "response_format.type"},
      {R"({"response_format": {"type": "json_schema"}})", "response_format.json_schema"},
      {R"({"response_format": {"type": "json_schema", "json_schema": []}})", "response_format.json_schema"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})",
       "response_format.json_schema.schema"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"schema": "{}"}}})",
       "response_format.json_schema.schema"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": 1, "schema": {}}}})",
       "response_format.json_schema.name"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"strict": "yes", "schema": {}}}})",
       "response_format.json_schema.strict"},
      {R"({"response_format": {"type": "regex"}})", "response_format.regex"},
      {R"({"response_format": {"type": "regex", "regex": ""}})", "response_format.regex"},
      {R"({"response_format": {"type": "grammar", "grammar": 5}})", "response_format.grammar"},
  };
  for (const auto& [body, field] : cases) {
    const ApiError e = parse_error(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, field) << body;
    EXPECT_EQ(std::string(e.what()).rfind(std::string(field) + ": ", 0), 0u) << e.what();
  }
}

class ShippedCache : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = Tokenizer::load(std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-16m");
    ASSERT_TRUE(tok_);
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(ShippedCache, CompilesEachSpecOnceAndEvictsTheLeastRecentlyUsed) {
  ConstraintCache cache(*tok_, {0}, tok_->vocab_size(), /*capacity=*/2);
  const auto a = ConstraintSpec::regex("[0-9]+");
  const auto b = ConstraintSpec::json_object();
  const auto c = ConstraintSpec::regex("[a-z]+");
  const auto ca = cache.get(a, true);
  EXPECT_EQ(cache.get(a, true), ca);  // the same compiled object
  EXPECT_EQ(cache.compiles(), 1u);
  EXPECT_NE(cache.get(a, false), ca);  // without EOS ids: another vocabulary, another entry
  EXPECT_EQ(cache.compiles(), 2u);
  cache.get(a, true);  // a hit: (a, no eos) is now the least recently used
  EXPECT_EQ(cache.compiles(), 2u);
  cache.get(b, true);  // evicts (a, no eos)
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.get(a, true), ca);  // still held
  EXPECT_EQ(cache.compiles(), 3u);
  cache.get(c, true);  // evicts b
  cache.get(a, true);
  EXPECT_EQ(cache.compiles(), 4u);
  cache.get(b, true);  // compiled again
  EXPECT_EQ(cache.compiles(), 5u);
  cache.get(a, false);
  EXPECT_EQ(cache.compiles(), 6u);
}

TEST_F(ShippedCache, TheChatEndOfTurnEndsAConstrainedAnswer) {
  ConstraintCache cache(*tok_, {0}, tok_->vocab_size());
  const auto with = cache.get(ConstraintSpec::json_object(), true);
  const auto id = tok_->token_id("<|im_end|>");
  ASSERT_TRUE(id);
  EXPECT_TRUE(with->vocab().is_eos(*id));
  EXPECT_TRUE(with->vocab().is_eos(0));
  const auto without = cache.get(ConstraintSpec::json_object(), false);
  EXPECT_FALSE(without->vocab().is_eos(*id));
}

TEST_F(ShippedCache, CompileErrorsAreA400NamingTheField) {
  ServingContext ctx;
  ctx.tokenizer = tok_.get();
  ctx.constraints = std::make_shared<ConstraintCache>(*tok_, std::vector<int32_t>{0}, tok_->vocab_size());
  const std::pair<const char*, const char*> cases[] = {
      {R"({"response_format": {"type": "json_schema", "json_schema": {"schema": {"not": {"type": "string"}}}}})",
       "response_format.json_schema.schema"},
      {R"({"response_format": {"type": "regex", "regex": "(ab"}})", "response_format.regex"},
      {R"({"response_format": {"type": "grammar", "grammar": "root ::= \"a\" missing"}})", "response_format.grammar"},
  };
  for (const auto& [body, field] : cases) {
    const auto f = parse_response_format(Body::parse(body));
    ASSERT_TRUE(f) << body;
    try {
      compile_response_format(*f, ctx, true);
      ADD_FAILURE() << "compiled: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.param, field);
      EXPECT_EQ(e.type, "invalid_request_error");
      EXPECT_EQ(std::string(e.what()).rfind(std::string(field) + ": ", 0), 0u) << e.what();
    }
  }
  // The unsupported keyword is named in the message.
  const auto f = parse_response_format(Body::parse(std::get<0>(cases[0])));
  try {
    compile_response_format(*f, ctx, true);
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("not"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lockstep::server
