// ChoiceText with shown special tokens (tool-call markers that are special tokens): their text
// stays in the answer, streamed and whole alike, every other special token is skipped, and a
// stop-string cut (counted by the engine in the text without them) lands in the same place.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "server/choice_text.h"

namespace lockstep::server {
namespace {

class ChoiceTextShown : public ::testing::Test {
 protected:
  void SetUp() override { tok_ = Tokenizer::load(std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-16m"); }
  std::vector<int32_t> ids(const std::string& s) const { return tok_->encode(s, false); }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(ChoiceTextShown, KeepsTheShownTokensText) {
  const int32_t start = *tok_->token_id("<|im_start|>"), end = *tok_->token_id("<|im_end|>");
  std::vector<int32_t> all = ids("a = 1");
  all.push_back(start);
  for (int32_t id : ids("call(x)")) all.push_back(id);
  all.push_back(end);  // special, not shown: skipped
  all.push_back(start);
  ChoiceText text(tok_.get(), {}, {start});
  std::string streamed;
  for (int32_t id : all) streamed += text.push(id);
  streamed += text.finish(std::string::npos);
  EXPECT_EQ(streamed, "a = 1<|im_start|>call(x)<|im_start|>");
  EXPECT_EQ(text.sent(), streamed);
  // Without shown tokens the text is generate's: every special token skipped.
  ChoiceText plain(tok_.get(), {});
  for (int32_t id : all) plain.push(id);
  plain.finish(std::string::npos);
  EXPECT_EQ(plain.sent(), "a = 1call(x)");
}

TEST_F(ChoiceTextShown, CutsWhereTheEngineCut) {
  const int32_t start = *tok_->token_id("<|im_start|>");
  std::vector<int32_t> all = ids("ab");
  all.push_back(start);
  for (int32_t id : ids("cdSTOPef")) all.push_back(id);
  // The engine's text_limit counts "abcd" (the text without special tokens) before "STOP".
  ChoiceText text(tok_.get(), {"STOP"}, {start});
  for (int32_t id : all) text.push(id);
  text.finish(4);
  EXPECT_EQ(text.sent(), "ab<|im_start|>cd");
}

// tokens_until(n): how many tokens the text needed to reach n bytes, each token's own end
// counted from a one-token-at-a-time decode.
TEST_F(ChoiceTextShown, TokensUntilCountsTheTokensThatReachAnOffset) {
  const std::vector<int32_t> all = ids("def f(x):\n    return x + 1");
  ASSERT_GT(all.size(), 3u);
  ChoiceText text(tok_.get(), {});
  std::vector<size_t> ends;
  for (int32_t id : all) {
    text.push(id);
    ends.push_back(tok_->decode(std::span<const int32_t>(all.data(), ends.size() + 1), true).size());
  }
  text.finish(std::string::npos);
  EXPECT_EQ(text.tokens_until(0), 0);
  for (size_t i = 0; i < ends.size(); ++i) {
    EXPECT_EQ(text.tokens_until(ends[i]), static_cast<int64_t>(i) + 1) << i;
    if (i + 1 < ends.size() && ends[i] + 1 <= ends[i + 1]) {
      EXPECT_EQ(text.tokens_until(ends[i] + 1), static_cast<int64_t>(i) + 2) << i;
    }
  }
  EXPECT_EQ(text.tokens_until(ends.back() + 100), static_cast<int64_t>(all.size()));
}

}  // namespace
}  // namespace lockstep::server
