// The pythonic call list of Llama 3.2 / Llama 4 to JSON arguments: every literal kind, escapes,
// nesting, trailing commas; anything that is not such a list is refused (the parser then keeps
// the answer as text).
#include "server/tools/pythonic_calls.h"

#include <gtest/gtest.h>

#include <string>

namespace lockstep::server::tools {
namespace {

std::string args_of(std::string_view text, size_t i = 0) {
  const auto calls = parse_pythonic_calls(text);
  return calls && i < calls->size() ? (*calls)[i].name + (*calls)[i].arguments : "<refused>";
}

TEST(PythonicCalls, LiteralsBecomeJson) {
  EXPECT_EQ(args_of(R"([f(s="a\"b", t='c\'d', n=-3, x=1.5e2, p=+2, ok=True, no=False, z=None)])"),
            R"(f{"s":"a\"b","t":"c'd","n":-3,"x":150.0,"p":2,"ok":true,"no":false,"z":null})");
  EXPECT_EQ(args_of(R"([f(l=[1, [2, 3]], t=(1, 'x'), d={'k': {"n": [true, null]}}, e=[], o={})])"),
            R"(f{"l":[1,[2,3]],"t":[1,"x"],"d":{"k":{"n":[true,null]}},"e":[],"o":{}})");
  EXPECT_EQ(args_of(R"([f(u="\u00e9\x41\n\t\\", raw="a\qb")])"), "f{\"u\":\"\u00e9A\\n\\t\\\\\",\"raw\":\"a\\\\qb\"}");
  EXPECT_EQ(args_of("  [ f ( a = 1 , ) , g() , ]\n"), R"(f{"a":1})");
  EXPECT_EQ(args_of("[f(a=1), g.v2-x(b='y')]", 1), R"(g.v2-x{"b":"y"})");
}

TEST(PythonicCalls, AnythingElseIsRefused) {
  for (const char* bad : {"", "[]", "f(a=1)", "[f(a=1)", "[f(a=1)] x", "[f(1)]", "[f(a)]", "[f(a=b)]", "[(a=1)]",
                          "[f(a=1 b=2)]", "[f(a='x)]", "[f(a=\"x\ny\")]", "[f(a=1.)]", "[f(a=0x1F)]",
                          "[f(a={1: 2})]", "[f(a=1, a=2)]", "[f(d={'k': 1, 'k': 2})]", "[f(a=\"\\ud800\")]",
                          "[f(a=\"\\x4\")]", "{\"name\": \"f\"}"})
    EXPECT_EQ(args_of(bad), "<refused>") << bad;
  std::string deep = "[f(a=" + std::string(70, '[') + std::string(70, ']') + ")]";
  EXPECT_EQ(args_of(deep), "<refused>");
  std::string fine = "[f(a=" + std::string(60, '[') + std::string(60, ']') + ")]";
  EXPECT_NE(args_of(fine), "<refused>");
}

}  // namespace
}  // namespace lockstep::server::tools
