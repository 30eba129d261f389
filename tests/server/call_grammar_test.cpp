// The grammar of forced tool calls, per family: the call text each family's template teaches is
// a sentence (and parses back to the call), calls that break a tool's schema or name another
// tool are not, and `several` admits a list of calls where the family has one.
#include <gtest/gtest.h>

#include <string>

#include "../constraints/test_util.h"
#include "core/error.h"
#include "server/tools/call_grammar.h"

namespace lockstep::server::tools {
namespace {

}  // namespace

inline void PrintTo(const ToolCall& c, std::ostream* os) { *os << c.name << c.arguments; }

namespace {

using constraints::testing::matches;

ToolList weather() {
  return {{"get_weather", Json::parse(R"({"type": "object", "properties": {
             "city": {"type": "string", "maxLength": 10},
             "unit": {"type": "string", "enum": ["c", "f"]},
             "days": {"type": "integer", "minimum": 1, "maximum": 7},
             "tags": {"type": "array", "items": {"type": "string"}}},
           "required": ["city", "unit"], "additionalProperties": false})")},
          {"ping", Json::object()}};
}

// `text` is a sentence and the family's parser reads it back as `want`.
void accepted(ToolFamily f, bool several, const std::string& text, const std::vector<ToolCall>& want) {
  SCOPED_TRACE(std::string(family_name(f)) + ": " + text);
  const constraints::Grammar g = tool_call_grammar(f, weather(), several);
  EXPECT_TRUE(matches(g, text));
  const ToolOutput out = parse_tool_output(*make_tool_parser(f, weather()), text, true);
  EXPECT_EQ(out.calls, want);
  EXPECT_EQ(out.content, "");
}

void refused(ToolFamily f, bool several, const std::string& text) {
  SCOPED_TRACE(std::string(family_name(f)) + ": " + text);
  EXPECT_FALSE(matches(tool_call_grammar(f, weather(), several), text));
}

const ToolCall kParis{"get_weather", R"({"city":"Paris","unit":"c"})"};
const ToolCall kPing{"ping", "{}"};

TEST(CallGrammar, Hermes) {
  const ToolFamily f = ToolFamily::kHermes;
  accepted(f, false, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>", {kParis});
  accepted(f, true, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\",\"unit\":\"c\"}}\n</tool_call>\n"
                    "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>", {kParis, kPing});
  refused(f, false, "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>");
  refused(f, false, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  refused(f, false, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"k\"}}\n</tool_call>");
  refused(f, false, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>");
  refused(f, false, "Sure! <tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>");
}

TEST(CallGrammar, Llama3IsOneCall) {
  const ToolFamily f = ToolFamily::kLlama3;
  accepted(f, true, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"c\"}}", {kParis});
  refused(f, true, "{\"name\": \"ping\", \"parameters\": {}}\n{\"name\": \"ping\", \"parameters\": {}}");
  refused(f, true, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"c\", \"days\": 9}}");
}

TEST(CallGrammar, MistralBothForms) {
  accepted(ToolFamily::kMistralJson, true,
           "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}, "
           "{\"name\": \"ping\", \"arguments\": {}}]", {kParis, kPing});
  accepted(ToolFamily::kMistralArgs, true,
           "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"unit\": \"c\"}[TOOL_CALLS]ping[ARGS]{}", {kParis, kPing});
  refused(ToolFamily::kMistralArgs, false, "[TOOL_CALLS]ping[ARGS]{}[TOOL_CALLS]ping[ARGS]{}");
  refused(ToolFamily::kMistralArgs, false, "[TOOL_CALLS]get_weather[ARGS]{\"unit\": \"c\"}");
}

TEST(CallGrammar, QwenXml) {
  const ToolFamily f = ToolFamily::kQwenXml;
  accepted(f, false, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                     "<parameter=unit>\nc\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
           {{"get_weather", R"({"city":"Paris","unit":"c","days":3})"}});
  accepted(f, true, "<tool_call>\n<function=ping>\n</function>\n</tool_call>\n<tool_call>\n<function=ping>\n</function>\n</tool_call>",
           {kPing, kPing});
  refused(f, false, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>");
  refused(f, false, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\nc\n"
                    "</parameter>\n<parameter=days>\n30\n</parameter>\n</function>\n</tool_call>");
}

TEST(CallGrammar, Gemma4) {
  const ToolFamily f = ToolFamily::kGemma4;
  accepted(f, false, "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,unit:<|\"|>c<|\"|>}<tool_call|>", {kParis});
  accepted(f, true, "<|tool_call>call:get_weather{city:<|\"|>Nice<|\"|>,unit:<|\"|>f<|\"|>,days:2,tags:[<|\"|>a<|\"|>,<|\"|>b<|\"|>]}"
                    "<tool_call|><|tool_call>call:ping{}<tool_call|>",
           {{"get_weather", R"({"city":"Nice","unit":"f","days":2,"tags":["a","b"]})"}, kPing});
  accepted(f, false, "<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>,unit:<|\"|>c<|\"|>,tags:[]}<tool_call|>",
           {{"get_weather", R"({"city":"Oslo","unit":"c","tags":[]})"}});
  refused(f, false, "<|tool_call>call:get_weather{unit:<|\"|>c<|\"|>}<tool_call|>");
  refused(f, false, "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,unit:<|\"|>x<|\"|>}<tool_call|>");
  refused(f, false, "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,,unit:<|\"|>c<|\"|>}<tool_call|>");
}

TEST(CallGrammar, RefusedSchemasNameTheTool) {
  ToolList bad = {{"f", Json::parse(R"({"type": "object", "properties": {"x": {"not": {}}}})")}};
  try {
    tool_call_grammar(ToolFamily::kHermes, bad, false);
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tool \"f\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'not'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lockstep::server::tools
