// Unit tests of the interpreter: each expected string was checked against Python Jinja2 3.1.6 in
// an ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True), as transformers uses.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "chat/chat_template.h"
#include "core/error.h"

namespace lockstep {
namespace {

std::string render(const std::string& src, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  return ChatTemplate(src).render(nlohmann::ordered_json::array(), vars);
}

TEST(ChatRender, Literals) {
  EXPECT_EQ(render("{{ [1,'a',\"it's\", none, true, 1.5, {'k': [2]}] }}"),
            "[1, 'a', \"it's\", None, True, 1.5, {'k': [2]}]");
  EXPECT_EQ(render("{{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 10/4 }} {{ 7//2 }} {{ -7 % 3 }} {{ 2**10 }}"),
            "1e+16 1000000000000000.0 0.0001 1e-05 2.5 3 2 1024");
}

}  // namespace
}  // namespace lockstep
namespace lockstep {
namespace {

using ojson = nlohmann::ordered_json;

// The message of the lockstep::Error that rendering (or parsing) `src` throws.
std::string error_of(const std::string& src, const ojson& vars = ojson::object()) {
  try {
    render(src, vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ChatRender, WhitespaceControlAsTransformers) {
  // trim_blocks drops the newline after a tag; lstrip_blocks drops indentation before one.
  EXPECT_EQ(render("x\n    {% if true %}\n    y\n    {% endif %}\nz"), "x\n    y\nz");
  EXPECT_EQ(render("a  \n  {%- if true -%}  \n  b  \n  {%- endif -%}  \n  c"), "abc");
  EXPECT_EQ(render("{{ 'v' }}\n   {% if true %}X{% endif %}"), "v\nX");
  EXPECT_EQ(render("line\n"), "line");  // one trailing newline is dropped
  EXPECT_EQ(render("a\r\nb"), "a\nb");
}

TEST(ChatRender, ScopingLikeJinja2) {
  EXPECT_EQ(render("{% set x = 'o' %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}{% endfor %}{{ x }}"), "[o][o]o");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "6");
  EXPECT_EQ(render("{% if true %}{% set y = 1 %}{% endif %}{{ y }}"), "1");
}

TEST(ChatRender, UndefinedSemantics) {
  EXPECT_EQ(render("[{{ nothing }}][{{ nothing | default('d') }}][{{ nothing is defined }}][{{ {}.x }}]"),
            "[][d][False][]");
  EXPECT_NE(error_of("{{ nothing.attr }}").find("'nothing' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ nothing + 1 }}").find("'nothing' is undefined"), std::string::npos);
}

TEST(ChatRender, TransformersVariables) {
  // add_generation_prompt defaults to false; tools and documents are always defined as none.
  EXPECT_EQ(render("{{ add_generation_prompt }} {{ tools }} {{ documents is none }} {{ bos_token is defined }}"),
            "False None True False");
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y %A') }}", {{"strftime_now", "2024-07-26"}}), "26 Jul 2024 Friday");
  EXPECT_EQ(render("{{ strftime_now('%H:%M') }}", {{"strftime_now", "2025-01-02T13:45:00"}}), "13:45");
}

TEST(ChatRender, ErrorsCarryLineAndColumn) {
  EXPECT_NE(error_of("a\nb {{ nothing.attr }}").find("chat template line 2, column "), std::string::npos);
  const std::string raised = error_of("x\n\n  {{ raise_exception('roles must alternate') }}");
  EXPECT_NE(raised.find("chat template line 3, column "), std::string::npos) << raised;
  EXPECT_NE(raised.find("raise_exception: roles must alternate"), std::string::npos) << raised;
  EXPECT_NE(error_of("{% if x %}open").find("expected 'elif' or 'else' or 'endif'"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 +  }}").find("line 1, column 9: syntax error: expected an expression"), std::string::npos)
      << error_of("{{ 1 +  }}");
  EXPECT_NE(error_of("{{ x | no_such_filter }}").find("no filter named 'no_such_filter'"), std::string::npos);
  EXPECT_NE(error_of("{{ x is no_such_test }}").find("no test named 'no_such_test'"), std::string::npos);
  EXPECT_NE(error_of("{% include 'other.jinja' %}").find("unsupported tag 'include'"), std::string::npos);
  EXPECT_NE(error_of("{{ 'unterminated }}").find("unterminated string literal"), std::string::npos);
  EXPECT_NE(error_of("{# open comment").find("unterminated comment"), std::string::npos);
  EXPECT_NE(error_of("{% set l = [] %}{{ l.append(1) }}").find("unsafe"), std::string::npos);
}

TEST(ChatRender, RunawayTemplatesFailInsteadOfHanging) {
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("nested deeper"), std::string::npos);
  EXPECT_NE(error_of("{{ range(1000000) | length }}").find("range too big"), std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("integer overflow"), std::string::npos);
}

TEST(ChatTemplateApi, KeyOrderFollowsTheJsonType) {
  const std::string src = "{{ tools | tojson }}";
  const auto ordered = ojson::parse(R"({"tools": {"z": 1, "a": [1.5, "é"]}})");
  EXPECT_EQ(ChatTemplate(src).render(ojson::array(), ordered), R"({"z": 1, "a": [1.5, "é"]})");
  const auto sorted = nlohmann::json::parse(R"({"tools": {"z": 1, "a": [1.5, "é"]}})");
  EXPECT_EQ(render_chat(src, nlohmann::json::array(), sorted), R"({"a": [1.5, "é"], "z": 1})");
}

TEST(ChatTemplateApi, RendersMessagesWithOptions) {
  const std::string chatml =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
  const ChatTemplate t(chatml);
  const auto messages = ojson::parse(R"([{"role": "user", "content": "Hi ✓"}])");
  EXPECT_EQ(t.render(messages, {{"add_generation_prompt", true}}),
            "<|im_start|>user\nHi ✓<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.render(messages, ojson::object()), "<|im_start|>user\nHi ✓<|im_end|>\n");
  EXPECT_THROW(t.render(messages, ojson::array()), Error);
}

TEST(ChatTemplateApi, ConfigHelpers) {
  const auto cfg = nlohmann::json::parse(R"({
    "chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}],
    "bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>", "pad_token": null})");
  EXPECT_EQ(chat::template_from_config(cfg), "D");
  EXPECT_EQ(chat::template_from_config(cfg, "tool_use"), "T");
  EXPECT_THROW(chat::template_from_config(cfg, "missing"), Error);
  EXPECT_THROW(chat::template_from_config(nlohmann::json::object()), Error);
  EXPECT_EQ(chat::special_tokens_from_config(cfg).dump(), R"({"bos_token":"<s>","eos_token":"</s>"})");
}

TEST(ChatTemplateApi, ConcurrentRendersAgree) {
  const ChatTemplate t("{% for i in range(50) %}{{ i ~ messages[0].content }}{% endfor %}");
  const auto messages = ojson::parse(R"([{"role": "user", "content": "x"}])");
  const std::string want = t.render(messages, ojson::object());
  std::vector<std::thread> threads;
  std::atomic<int> same{0};
  for (int k = 0; k < 8; ++k)
    threads.emplace_back([&] {
      for (int r = 0; r < 50; ++r) same += t.render(messages, ojson::object()) == want;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(same.load(), 400);
}

}  // namespace
}  // namespace lockstep
