// The tool-call parsers of each family: complete answers, answers streamed in every cut, and
// malformed call markup, which stays content (never an error).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/tools/gemma4_parser.h"
#include "server/tools/hermes_parser.h"
#include "server/tools/llama3_parser.h"
#include "server/tools/mistral_parser.h"
#include "server/tools/qwen_xml_parser.h"
#include "server/tools/tool_family.h"
#include "server/tools/tool_stream.h"

namespace lockstep::server::tools {
namespace {

}  // namespace

inline void PrintTo(const ToolCall& c, std::ostream* os) { *os << c.name << c.arguments; }

namespace {

ToolList weather_tools() {
  return {{"get_weather", Json::parse(R"({"type":"object","properties":{"city":{"type":"string"},
            "days":{"type":"integer"},"units":{"type":"array","items":{"type":"string"}}}})")},
          {"ping", Json::object()}};
}

struct Case {
  std::string text;
  std::string content;
  std::vector<ToolCall> calls;
};

// The whole parse, then the stream in two pieces at every cut and one byte at a time: all equal.
void check(const ToolCallParser& p, const Case& c, bool parallel = true) {
  SCOPED_TRACE(c.text);
  const ToolOutput whole = parse_tool_output(p, c.text, parallel);
  EXPECT_EQ(whole.content, c.content);
  EXPECT_EQ(whole.calls, c.calls);
  std::shared_ptr<const ToolCallParser> shared(&p, [](const ToolCallParser*) {});
  auto run = [&](const std::vector<std::string>& pieces) {
    ToolCallStream s(shared, parallel);
    ToolOutput got;
    for (const auto& piece : pieces) {
      auto d = s.push(piece);
      got.content += d.content;
      for (auto& k : d.calls) got.calls.push_back(k);
    }
    auto d = s.finish();
    got.content += d.content;
    for (auto& k : d.calls) got.calls.push_back(k);
    return got;
  };
  for (size_t cut = 0; cut <= c.text.size(); ++cut) {
    const ToolOutput got = run({c.text.substr(0, cut), c.text.substr(cut)});
    EXPECT_EQ(got.content, whole.content) << "cut at " << cut;
    EXPECT_EQ(got.calls, whole.calls) << "cut at " << cut;
  }
  std::vector<std::string> bytes;
  for (char ch : c.text) bytes.emplace_back(1, ch);
  const ToolOutput got = run(bytes);
  EXPECT_EQ(got.content, whole.content) << "byte by byte";
  EXPECT_EQ(got.calls, whole.calls) << "byte by byte";
}

TEST(HermesParser, CompleteCalls) {
  HermesParser p;
  check(p, {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
            {{"get_weather", R"({"city":"Paris"})"}}});
  check(p, {"Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
            "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>",
            "Let me check.", {{"get_weather", R"({"city":"Paris"})"}, {"ping", "{}"}}});
  // Arguments sent as a JSON string, and none at all.
  check(p, {R"(<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>)", "", {{"f", R"({"a":1})"}}});
  check(p, {R"(<tool_call>{"name": "f"}</tool_call> after)", "after", {{"f", "{}"}}});
}

TEST(HermesParser, PlainTextIsUnchanged) {
  HermesParser p;
  check(p, {"no calls here  \n", "no calls here  \n", {}});
  check(p, {"a < b and <tool_ is not a tag", "a < b and <tool_ is not a tag", {}});
  check(p, {"", "", {}});
}

TEST(HermesParser, MalformedCallsStayContent) {
  HermesParser p;
  check(p, {"<tool_call>{not json}</tool_call>", "<tool_call>{not json}</tool_call>", {}});
  check(p, {R"(<tool_call>{"arguments": {}}</tool_call>)", R"(<tool_call>{"arguments": {}}</tool_call>)", {}});
  check(p, {R"(<tool_call>{"name": "f", "arguments": [1]}</tool_call>)", R"(<tool_call>{"name": "f", "arguments": [1]}</tool_call>)", {}});
  // Cut off by max_tokens inside a call: the answer is text.
  check(p, {"ok <tool_call>{\"name\": \"f\", \"argu", "ok <tool_call>{\"name\": \"f\", \"argu", {}});
  // A good call after a bad one is still a call.
  check(p, {R"(<tool_call>oops</tool_call><tool_call>{"name": "g", "arguments": {}}</tool_call>)",
            "<tool_call>oops</tool_call>", {{"g", "{}"}}});
}

TEST(HermesParser, DeepNestingIsText) {
  HermesParser p;
  const std::string deep = "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": " + std::string(5000, '[') +
                           std::string(5000, ']') + "}}</tool_call>";
  const ToolOutput out = parse_tool_output(p, deep, true);
  EXPECT_TRUE(out.calls.empty());
  EXPECT_EQ(out.content, deep);
}

TEST(HermesParser, ParallelOffKeepsTheFirstCall) {
  HermesParser p;
  check(p, {R"(<tool_call>{"name": "a"}</tool_call><tool_call>{"name": "b"}</tool_call>)", "", {{"a", "{}"}}},
        /*parallel=*/false);
}

TEST(QwenXmlParser, ConvertsValuesByTheSchema) {
  QwenXmlParser p(weather_tools());
  check(p, {"<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
            "<parameter=units>\n[\"C\", \"F\"]\n</parameter>\n</function>\n</tool_call>",
            "", {{"get_weather", R"({"city":"42","days":3,"units":["C","F"]})"}}});
  // Unknown parameters: JSON when the text is JSON, else the text.
  check(p, {"Sure. <tool_call><function=other><parameter=x>true</parameter><parameter=y>two words</parameter>"
            "</function></tool_call>",
            "Sure.", {{"other", R"({"x":true,"y":"two words"})"}}});
  check(p, {"<tool_call>\n<function=ping>\n</function>\n</tool_call>", "", {{"ping", "{}"}}});
}

TEST(QwenXmlParser, MalformedCallsStayContent) {
  QwenXmlParser p(weather_tools());
  for (std::string bad : {"<tool_call><function=f><parameter=x>1</function></tool_call>",
                          "<tool_call>{\"name\": \"f\"}</tool_call>",
                          "<tool_call><function=f>stray<parameter=x>1</parameter></function></tool_call>",
                          "<tool_call><function=>\n</function></tool_call>",
                          "<tool_call><function=f><parameter=x>1</parameter>"})
    check(p, {bad, bad, {}});
}

TEST(Llama3Parser, WholeAnswerCalls) {
  Llama3Parser p;
  check(p, {R"({"name": "get_weather", "parameters": {"city": "Paris"}})", "", {{"get_weather", R"({"city":"Paris"})"}}});
  check(p, {"<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"x\": 1}}",
            "", {{"a", "{}"}, {"b", R"({"x":1})"}}});
  check(p, {"\n {\"name\": \"a\", \"parameters\": {\"s\": \"}{\"}}\n", "", {{"a", R"({"s":"}{"})"}}});
}

TEST(Llama3Parser, TextAndMalformedJson) {
  Llama3Parser p;
  check(p, {"The weather is nice. {\"name\": \"a\"}", "The weather is nice. {\"name\": \"a\"}", {}});
  check(p, {R"({"answer": 42})", R"({"answer": 42})", {}});
  check(p, {R"({"name": "a", "parameters": {})", R"({"name": "a", "parameters": {})", {}});
  check(p, {R"({"name": "a", "parameters": {}} trailing)", R"({"name": "a", "parameters": {}} trailing)", {}});
  check(p, {"<|python", "<|python", {}});
}

TEST(Llama3Parser, PythonicCallsAndLlama4Tags) {
  Llama3Parser p;
  check(p, {R"([get_weather(city="Paris", days=3), ping()])", "",
            {{"get_weather", R"({"city":"Paris","days":3})"}, {"ping", "{}"}}});
  check(p, {"<|python_tag|>[get_weather(city='Par\\'is', units=['C', \"F\"])]", "",
            {{"get_weather", R"({"city":"Par'is","units":["C","F"]})"}}});
  check(p, {"<|python_start|>[ping(deep=True, none=None)]<|python_end|>\n", "", {{"ping", R"({"deep":true,"none":null})"}}});
  check(p, {R"(<|python_start|>{"name": "ping", "parameters": {}}<|python_end|>)", "", {{"ping", "{}"}}});
}

TEST(Llama3Parser, MalformedPythonicStaysText) {
  Llama3Parser p;
  for (std::string bad : {"[see the docs](https://x)", "[]", "[ping(]", "[ping(a=1)] and more", "[ping(1)]",
                          "[ping(a=undefined_name)]", "[ping(a=1, a=2)]", "<|python_start|>[ping(a=)]<|python_end|>"})
    check(p, {bad, bad, {}});
}

TEST(MistralParser, BothForms) {
  MistralParser p;
  check(p, {R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "ping", "arguments": {}}])",
            "", {{"get_weather", R"({"city":"Paris"})"}, {"ping", "{}"}}});
  check(p, {R"(Checking. [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]ping[ARGS]{})",
            "Checking.", {{"get_weather", R"({"city":"Paris"})"}, {"ping", "{}"}}});
  check(p, {R"([TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{"a": [1, 2]})", "", {{"f", R"({"a":[1,2]})"}}});
}

TEST(MistralParser, MalformedCallsStayContent) {
  MistralParser p;
  for (std::string bad : {"[TOOL_CALLS]", "[TOOL_CALLS][{\"name\": \"f\"", "[TOOL_CALLS]f{\"a\": 1}",
                          "[TOOL_CALLS]two words[ARGS]{}", "[TOOL_CALLS]f[ARGS]{} extra", "[TOOL_CALLS][]"})
    check(p, {"x " + bad, "x " + bad, {}});
  check(p, {"[TOOL_", "[TOOL_", {}});
}

TEST(Gemma4Parser, TemplateNotation) {
  Gemma4Parser p;
  check(p, {"<|tool_call>call:get_weather{city:<|\"|>Paris, {France}<|\"|>,days:3,units:[<|\"|>C<|\"|>,<|\"|>F<|\"|>],"
            "opts:{deep:true,none:null,x:-1.5}}<tool_call|>",
            "", {{"get_weather", R"({"city":"Paris, {France}","days":3,"units":["C","F"],"opts":{"deep":true,"none":null,"x":-1.5}})"}}});
  check(p, {"First <|tool_call>call:ping{}<tool_call|><|tool_call>call:ping{}<tool_call|> done",
            "First  done", {{"ping", "{}"}, {"ping", "{}"}}});
}

TEST(Gemma4Parser, MalformedCallsStayContent) {
  Gemma4Parser p;
  for (std::string bad : {"<|tool_call>ping{}<tool_call|>", "<|tool_call>call:ping{a:bare word}<tool_call|>",
                          "<|tool_call>call:ping{a:<|\"|>open}<tool_call|>", "<|tool_call>call:ping{a:1",
                          "<|tool_call>call:ping{}extra<tool_call|>", "<|tool_call>call:two words{}<tool_call|>"})
    check(p, {bad, bad, {}});
}

TEST(ToolFamily, ChosenFromTheTemplate) {
  EXPECT_EQ(tool_family("{{ '<|tool_call>call:' }}"), ToolFamily::kGemma4);
  EXPECT_EQ(tool_family("[TOOL_CALLS] {{ x|tojson }}"), ToolFamily::kMistralJson);
  EXPECT_EQ(tool_family("[TOOL_CALLS]{{ name }}[ARGS]"), ToolFamily::kMistralArgs);
  EXPECT_EQ(tool_family("<tool_call>\n<function={{ name }}>"), ToolFamily::kQwenXml);
  EXPECT_EQ(tool_family("<tool_call>\n{\"name\": ...}"), ToolFamily::kHermes);
  EXPECT_EQ(tool_family("<|start_header_id|>ipython<|end_header_id|>"), ToolFamily::kLlama3);
  EXPECT_EQ(tool_family("<|header_start|>assistant<|header_end|>"), ToolFamily::kLlama3);
  EXPECT_EQ(tool_family("{{ messages }}"), ToolFamily::kHermes);
}

TEST(ToolFamily, CallIds) {
  const std::string a = new_tool_call_id(ToolFamily::kHermes), b = new_tool_call_id(ToolFamily::kHermes);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("call_", 0), 0u);
  EXPECT_EQ(a.size(), 29u);
  const std::string m = new_tool_call_id(ToolFamily::kMistralArgs);
  EXPECT_EQ(m.size(), 9u);
  for (char c : m) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << m;
}

}  // namespace
}  // namespace lockstep::server::tools
