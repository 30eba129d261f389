// The reasoning splitter: <think>...</think> at the start of a chat answer becomes
// reasoning_content, and the streamed split (any cut into deltas) equals the whole one.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "server/reasoning.h"

namespace lockstep::server {
namespace {

struct Case {
  std::string text;
  ReasoningMode mode;
  std::string reasoning, content;
  bool has_reasoning;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"plain answer", ReasoningMode::kDetect, "", "plain answer", false},
      {"<think>step 1\nstep 2</think>\n\nThe answer.", ReasoningMode::kDetect, "step 1\nstep 2", "The answer.", true},
      {"\n <think>a</think>b", ReasoningMode::kDetect, "a", "b", true},
      {"<think></think>", ReasoningMode::kDetect, "", "", true},
      {"<think>never closed", ReasoningMode::kDetect, "never closed", "", true},
      {"<think>x</thi", ReasoningMode::kDetect, "x</thi", "", true},
      {"<thinking>not a tag</thinking>", ReasoningMode::kDetect, "", "<thinking>not a tag</thinking>", false},
      {"<thi", ReasoningMode::kDetect, "", "<thi", false},
      {"  ", ReasoningMode::kDetect, "", "  ", false},
      {"text <think>late</think> tags stay", ReasoningMode::kDetect, "",
       "text <think>late</think> tags stay", false},
      {"<think>a</think>b</think>c", ReasoningMode::kDetect, "a", "b</think>c", true},
      {"<think>a < b </ c </think  </think>ok", ReasoningMode::kDetect, "a < b </ c </think  ", "ok", true},
      {"reasoned</think>\n\nanswer", ReasoningMode::kOpened, "reasoned", "answer", true},
      {"all reasoning", ReasoningMode::kOpened, "all reasoning", "", true},
      {"<think>a</think>b", ReasoningMode::kOff, "", "<think>a</think>b", false},
  };
  return all;
}

TEST(ReasoningSplitter, SplitsTheWholeText) {
  for (const Case& c : cases()) {
    bool has = !c.has_reasoning;
    const ReasoningParts p = ReasoningSplitter::split(c.text, c.mode, &has);
    EXPECT_EQ(p.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(p.content, c.content) << c.text;
    EXPECT_EQ(has, c.has_reasoning) << c.text;
  }
}

// Feeds `text` cut at `cuts` (sorted offsets) and returns the concatenated parts.
ReasoningParts stream(const std::string& text, ReasoningMode mode, const std::vector<size_t>& cuts) {
  ReasoningSplitter s(mode);
  ReasoningParts all;
  size_t from = 0;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const size_t to = i < cuts.size() ? cuts[i] : text.size();
    const ReasoningParts p = s.push(std::string_view(text).substr(from, to - from));
    all.reasoning += p.reasoning;
    all.content += p.content;
    from = to;
  }
  const ReasoningParts p = s.finish();
  all.reasoning += p.reasoning;
  all.content += p.content;
  return all;
}

TEST(ReasoningSplitter, EveryCutIntoTwoOrThreeDeltasGivesTheWholeSplit) {
  for (const Case& c : cases()) {
    const size_t n = c.text.size();
    for (size_t a = 0; a <= n; ++a)
      for (size_t b = a; b <= n; ++b) {
        const ReasoningParts p = stream(c.text, c.mode, {a, b});
        ASSERT_EQ(p.reasoning, c.reasoning) << c.text << " cut at " << a << "," << b;
        ASSERT_EQ(p.content, c.content) << c.text << " cut at " << a << "," << b;
      }
  }
}

TEST(ReasoningSplitter, ByteByByteNeverSendsATagAsText) {
  const std::string text = "<think>one</think>two";
  std::vector<size_t> cuts;
  for (size_t i = 1; i < text.size(); ++i) cuts.push_back(i);
  ReasoningSplitter s(ReasoningMode::kDetect);
  std::string reasoning, content;
  for (char ch : text) {
    const ReasoningParts p = s.push(std::string(1, ch));
    reasoning += p.reasoning;
    content += p.content;
    EXPECT_EQ(content.find('<'), std::string::npos) << "a tag leaked into content: " << content;
    EXPECT_EQ(reasoning.find('<'), std::string::npos) << "a tag leaked into reasoning: " << reasoning;
  }
  EXPECT_EQ(reasoning, "one");
  EXPECT_EQ(content, "two");
  EXPECT_TRUE(s.finish().content.empty());
  EXPECT_EQ(stream(text, ReasoningMode::kDetect, cuts).content, "two");
}

// The shipped tokenizer with <think> and </think> added (special or not).
std::unique_ptr<Tokenizer> with_think_tags(bool special) {
  std::ifstream in(std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-16m/tokenizer.json");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str());
  int next = static_cast<int>(j["model"]["vocab"].size());
  for (const auto& t : j["added_tokens"]) next = std::max(next, t["id"].get<int>() + 1);
  for (const char* tag : {"<think>", "</think>"})
    j["added_tokens"].push_back({{"id", next++}, {"content", tag}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", special}});
  return Tokenizer::from_json(j.dump());
}

// reasoning_end: the bytes the block spans, tags included, on every case above; the split's
// reasoning text always lies inside them.
TEST(ReasoningSplitter, ReasoningEndSpansTheBlock) {
  EXPECT_EQ(ReasoningSplitter::reasoning_end("plain answer", ReasoningMode::kDetect), 0u);
  EXPECT_EQ(ReasoningSplitter::reasoning_end("<think>a</think>b", ReasoningMode::kDetect), 16u);
  EXPECT_EQ(ReasoningSplitter::reasoning_end("\n <think>a</think>b", ReasoningMode::kDetect), 18u);
  EXPECT_EQ(ReasoningSplitter::reasoning_end("<think>never closed", ReasoningMode::kDetect), 19u);
  EXPECT_EQ(ReasoningSplitter::reasoning_end("text <think>late</think>", ReasoningMode::kDetect), 0u);
  EXPECT_EQ(ReasoningSplitter::reasoning_end("reasoned</think>\n\nanswer", ReasoningMode::kOpened), 16u);
  EXPECT_EQ(ReasoningSplitter::reasoning_end("all reasoning", ReasoningMode::kOpened), 13u);
  EXPECT_EQ(ReasoningSplitter::reasoning_end("<think>a</think>b", ReasoningMode::kOff), 0u);
  for (const Case& c : cases()) {
    const size_t end = ReasoningSplitter::reasoning_end(c.text, c.mode);
    EXPECT_EQ(end > 0, c.has_reasoning) << c.text;
    if (c.has_reasoning) {
      EXPECT_NE(c.text.substr(0, end).find(c.reasoning), std::string::npos) << c.text;
    }
  }
}

TEST(ReasoningMode, FollowsTheTokenizerAndThePrompt) {
  const auto plain = Tokenizer::load(std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-16m");
  const auto tags = with_think_tags(false);
  const auto special = with_think_tags(true);
  EXPECT_EQ(reasoning_mode("<|im_start|>assistant\n", plain.get()), ReasoningMode::kOff);
  EXPECT_EQ(reasoning_mode("<|im_start|>assistant\n", nullptr), ReasoningMode::kOff);
  EXPECT_EQ(reasoning_mode("<|im_start|>assistant\n", tags.get()), ReasoningMode::kDetect);
  // The template opened the block (DeepSeek-R1 style): the output starts inside it.
  EXPECT_EQ(reasoning_mode("<|im_start|>assistant\n<think>\n", tags.get()), ReasoningMode::kOpened);
  EXPECT_EQ(reasoning_mode("<|im_start|>assistant\n<think>\n", plain.get()), ReasoningMode::kOpened);
  // enable_thinking=false templates close an empty block: the answer is content.
  EXPECT_EQ(reasoning_mode("<think>\n\n</think>\n\n", tags.get()), ReasoningMode::kDetect);
  // Special tags vanish from decoded text, so there is nothing to split on.
  EXPECT_EQ(reasoning_mode("<|im_start|>assistant\n<think>\n", special.get()), ReasoningMode::kOff);
}

}  // namespace
}  // namespace lockstep::server
