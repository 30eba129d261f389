// GET /v1/models as bench-serve reads it from lockstep (vocab_size, max_model_len at the top of
// the model), from servers that say context_length, and from llama-server (under "meta"); a
// reply that is no model list is an error that shows what came back.
#include <gtest/gtest.h>

#include "client/serve_bench.h"
#include "core/error.h"

namespace lockstep::client {
namespace {

TEST(ModelsReply, LockstepFieldsAtTheTop) {
  const ServerInfo i = parse_models_reply(
      R"({"object": "list", "data": [{"id": "qwen3", "max_model_len": 4096, "vocab_size": 151936},
                                     {"id": "other", "vocab_size": 7}]})");
  EXPECT_EQ(i.model, "qwen3");
  EXPECT_EQ(i.max_model_len, 4096);
  EXPECT_EQ(i.vocab_size, 151936);
}

TEST(ModelsReply, ContextLengthStandsInForMaxModelLen) {
  const ServerInfo i = parse_models_reply(R"({"data": [{"id": "m", "context_length": 8192}]})");
  EXPECT_EQ(i.max_model_len, 8192);
  EXPECT_EQ(i.vocab_size, 0);  // not said: the caller asks for --vocab-size
}

TEST(ModelsReply, LlamaServerMeta) {
  // The shape llama-server (llama.cpp de3ff81) answers, trimmed: n_ctx is one slot's context.
  const ServerInfo i = parse_models_reply(
      R"({"models": [{"name": "q.gguf"}], "object": "list",
          "data": [{"id": "q.gguf", "object": "model", "owned_by": "llamacpp",
                    "meta": {"vocab_type": 2, "n_vocab": 151936, "n_ctx": 1280,
                             "n_ctx_train": 40960, "n_embd": 1024}}]})");
  EXPECT_EQ(i.model, "q.gguf");
  EXPECT_EQ(i.vocab_size, 151936);
  EXPECT_EQ(i.max_model_len, 1280);
}

TEST(ModelsReply, TopLevelFieldsWinOverMeta) {
  const ServerInfo i = parse_models_reply(
      R"({"data": [{"id": "m", "vocab_size": 100, "max_model_len": 64,
                    "meta": {"n_vocab": 200, "n_ctx": 32}}]})");
  EXPECT_EQ(i.vocab_size, 100);
  EXPECT_EQ(i.max_model_len, 64);
}

TEST(ModelsReply, NotAModelListIsAnError) {
  for (const char* body : {"", "not json", "[]", R"({"data": []})", R"({"data": [3]})",
                           R"({"models": [{"name": "x"}]})"}) {
    try {
      parse_models_reply(body);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected {\"data\""), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lockstep::client
