// Request bodies at the edge of what the parser accepts: nesting depth (a deep body must be a 400
// naming its field, never a stack overflow in a recursive walk), numbers out of range. HTTP
// framing is checked against a real server (tests/server/abuse.mjs).
#include <gtest/gtest.h>

#include <string>

#include "chat/builtins.h"
#include "core/error.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace lockstep::server {
namespace {

std::string nested(const std::string& field, int levels) {
  return "{\"" + field + "\": " + std::string(static_cast<size_t>(levels), '[') +
         std::string(static_cast<size_t>(levels), ']') + "}";
}

ApiError error_of(const std::string& text) {
  try {
    parse_body(text);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << text.substr(0, 80);
  return ApiError(0, "");
}

TEST(ParseBody, NestingUpToTheLimitIsAccepted) {
  // The body object is one level, so its field may nest kMaxJsonDepth - 1 more.
  const Body b = parse_body(nested("tools", kMaxJsonDepth - 1));
  EXPECT_TRUE(b.at("tools").is_array());
}

TEST(ParseBody, DeeperNestingIsRefusedNamingTheField) {
  for (const char* field : {"tools", "chat_template_kwargs", "messages"}) {
    const ApiError e = error_of(nested(field, kMaxJsonDepth));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, field);
    EXPECT_EQ(e.code, "invalid_value");
    EXPECT_NE(std::string(e.what()).find("nested deeper than 64"), std::string::npos) << e.what();
  }
}

TEST(ParseBody, ThirtyThousandLevelsAreRefusedWithoutRecursion) {
  // The body of the crash report: 30,000 `[` inside an extra message field (60 KB).
  std::string body = R"({"model": "default", "messages": [{"role": "user", "content": "hi", "x": )";
  body += std::string(30000, '[') + std::string(30000, ']') + "}]}";
  const ApiError e = error_of(body);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages");
  // A body that is itself a deep array has no field to name.
  EXPECT_EQ(error_of(std::string(100000, '[')).param, "");
}

TEST(ParseBody, NumberOverflowIsInvalidJson) {
  const ApiError e = error_of(R"({"temperature": 1e999})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_json");
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_NE(std::string(e.what()).find("1e999"), std::string::npos) << e.what();
  EXPECT_EQ(error_of(R"({"seed": -1e400})").code, "invalid_json");
}

TEST(ParseBody, MalformedAndNonObjectBodies) {
  EXPECT_EQ(error_of(R"({"prompt": )").code, "invalid_json");
  EXPECT_EQ(error_of("[1, 2]").code, "invalid_json");
  EXPECT_EQ(error_of("\"\xff\"").code, "invalid_json");  // invalid UTF-8 in a string
}

TEST(ChatFromJson, DeepValuesFailInsteadOfOverflowingTheStack) {
  // The chat layer's own guard, for callers other than the server.
  nlohmann::ordered_json deep = nlohmann::ordered_json::array();
  for (int i = 0; i < 200; ++i) deep = nlohmann::ordered_json::array({deep});
  EXPECT_THROW(chat::from_json(deep), Error);
  nlohmann::ordered_json ok = nlohmann::ordered_json::array();
  for (int i = 0; i < 100; ++i) ok = nlohmann::ordered_json::array({ok});
  EXPECT_NO_THROW(chat::from_json(ok));
}

}  // namespace
}  // namespace lockstep::server
