// A streamed completion read as the benchmark reads it: tokens per chunk from running usage (or
// one per chunk without it), the text, and each way a stream can fail; plus the request body.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "client/completion_stream.h"

namespace lockstep::client {
namespace {

std::string chunk(const std::string& text, int completion_tokens) {
  nlohmann::json j = {{"choices", {{{"index", 0}, {"text", text}, {"finish_reason", nullptr}}}}};
  j["usage"] = completion_tokens < 0 ? nlohmann::json(nullptr)
                                     : nlohmann::json{{"prompt_tokens", 4}, {"completion_tokens", completion_tokens}};
  return j.dump();
}

std::string final_usage(int completion_tokens) {
  return nlohmann::json{{"choices", nlohmann::json::array()},
                        {"usage", {{"prompt_tokens", 4}, {"completion_tokens", completion_tokens}}}}
      .dump();
}

TEST(StreamTally, RunningUsageCountsTheTokensOfEachChunk) {
  StreamTally t;
  t.on_event(chunk("a", 1), 0.5);
  t.on_event(chunk("", 2), 0.6);   // a token whose text is held back still arrived
  t.on_event(chunk("bcd", 5), 0.9);  // a speculative round: three tokens at once
  t.on_event(chunk("", 5), 0.95);    // the finish chunk: no new token
  t.on_event(final_usage(5), 0.96);
  t.on_event("[DONE]", 0.97);
  EXPECT_EQ(t.verdict(5), "");
  EXPECT_EQ(t.text(), "abcd");
  EXPECT_TRUE(t.counted_per_chunk());
  ASSERT_EQ(t.arrivals().size(), 3u);
  EXPECT_EQ(t.arrivals()[2].tokens, 3);
  EXPECT_DOUBLE_EQ(t.arrivals()[0].seconds, 0.5);
}

TEST(StreamTally, WithoutRunningUsageEachChunkWithTextIsOneToken) {
  StreamTally t;
  t.on_event(chunk("a", -1), 0.1);
  t.on_event(chunk("", -1), 0.2);
  t.on_event(chunk("b", -1), 0.3);
  t.on_event(final_usage(2), 0.4);
  t.on_event("[DONE]", 0.4);
  EXPECT_EQ(t.verdict(2), "");
  EXPECT_FALSE(t.counted_per_chunk());
  EXPECT_EQ(t.arrivals().size(), 2u);
}

TEST(StreamTally, FailuresAreNamed) {
  StreamTally no_done;
  no_done.on_event(chunk("a", 1), 0.1);
  no_done.on_event(final_usage(1), 0.2);
  EXPECT_NE(no_done.verdict(1).find("[DONE]"), std::string::npos);

  StreamTally wrong_count;
  wrong_count.on_event(chunk("a", 1), 0.1);
  wrong_count.on_event(final_usage(1), 0.2);
  wrong_count.on_event("[DONE]", 0.3);
  EXPECT_NE(wrong_count.verdict(8).find("wrong token count: 1 completion tokens, asked for 8"), std::string::npos);

  StreamTally error;
  error.on_event(chunk("a", 1), 0.1);
  error.on_event(R"({"error": {"message": "generation failed: boom", "type": "server_error"}})", 0.2);
  error.on_event("[DONE]", 0.3);
  EXPECT_EQ(error.verdict(1), "error event: generation failed: boom");

  StreamTally no_usage;
  no_usage.on_event(chunk("a", -1), 0.1);
  no_usage.on_event("[DONE]", 0.2);
  EXPECT_NE(no_usage.verdict(1).find("no usage"), std::string::npos);

  StreamTally garbage;
  garbage.on_event("{not json", 0.1);
  EXPECT_NE(garbage.verdict(1).find("malformed event"), std::string::npos);
}

TEST(CompletionBody, AsksForExactlyMaxTokensStreamedWithUsage) {
  CompletionRequest r;
  r.model = "m";
  r.prompt = {5, 6, 7};
  r.max_tokens = 9;
  r.seed = 3;
  const auto j = nlohmann::json::parse(completion_body(r));
  EXPECT_EQ(j["prompt"], nlohmann::json({5, 6, 7}));
  EXPECT_EQ(j["max_tokens"], 9);
  EXPECT_EQ(j["ignore_eos"], true);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  EXPECT_EQ(j["stream_options"]["continuous_usage_stats"], true);
  EXPECT_EQ(j["seed"], 3);
  EXPECT_EQ(j["temperature"], 0.0);
}

}  // namespace
}  // namespace lockstep::client
