// Regular-expression front end: full-match constraints and JSON Schema's search semantics.
#include "constraints/regex.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"

namespace lockstep::constraints {
namespace {

using testing::matches;

std::string error_of(std::string_view re) {
  try {
    compile_regex(re);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Regex, LiteralsClassesGroupsAndQuantifiers) {
  const Grammar g = compile_regex(R"(^(?:ab|c)+[x-z]{2,3}\d?\.$)");
  EXPECT_TRUE(matches(g, "abcxy."));
  EXPECT_TRUE(matches(g, "cxyz7."));
  EXPECT_FALSE(matches(g, "xy."));      // + needs one
  EXPECT_FALSE(matches(g, "abx."));     // {2,3}
  EXPECT_FALSE(matches(g, "abxyzx."));
  EXPECT_FALSE(matches(g, "abxy5"));    // \. is a dot
  const Grammar open = compile_regex("a{2,}b*?");
  EXPECT_TRUE(matches(open, "aaab"));
  EXPECT_FALSE(matches(open, "ab"));
  EXPECT_TRUE(matches(compile_regex("x{1"), "x{1"));  // not a quantifier: literal
}

TEST(Regex, ShorthandsDotAndUnicode) {
  const Grammar g = compile_regex(R"([^\s\d]\w\S.)");
  EXPECT_TRUE(matches(g, "é_!日"));
  EXPECT_FALSE(matches(g, " a!x"));
  EXPECT_FALSE(matches(g, "a_!\n"));  // . is no line terminator
  EXPECT_FALSE(matches(g, "aé!x"));   // \w is ASCII
  EXPECT_TRUE(matches(compile_regex(R"(\u00e9\x41\u{1F600})"), "éA😀"));
}

TEST(Regex, SearchSemanticsPadUnanchoredSides) {
  auto search = [](std::string_view re) {
    GrammarBuilder b;
    const uint32_t r = b.add_rule("root");
    b.define(r, regex_expr(re, RegexAnchoring::kSearch, [](const CodepointSet& s) { return codepoints(s); }));
    return b.build(r);
  };
  const Grammar anywhere = search("ab+");
  EXPECT_TRUE(matches(anywhere, "xxabbby"));
  EXPECT_FALSE(matches(anywhere, "xxay"));
  const Grammar start = search("^ab|c$");
  EXPECT_TRUE(matches(start, "abzzz"));
  EXPECT_FALSE(matches(start, "zab"));
  EXPECT_TRUE(matches(start, "zzc"));
  EXPECT_FALSE(matches(start, "cz"));
}

TEST(Regex, UnsupportedConstructsNameTheOffset) {
  EXPECT_EQ(error_of("a(?=b)"), "regex at offset 1: lookaround and other (? groups are not supported");
  EXPECT_EQ(error_of("(a)\\1"), "regex at offset 3: backreferences are not supported");
  EXPECT_EQ(error_of("\\bword"), "regex at offset 0: word boundaries (\\b) are not supported");
  EXPECT_EQ(error_of("a^b"), "regex at offset 1: '^' is supported only at the start of a top-level alternative");
  EXPECT_EQ(error_of("(a$)"), "regex at offset 2: '$' is supported only at the end of a top-level alternative");
  EXPECT_EQ(error_of("(ab"), "regex at offset 0: '(' without ')'");
  EXPECT_EQ(error_of("*a"), "regex at offset 0: nothing to repeat before '*'");
  EXPECT_EQ(error_of("[z-a]"), "regex at offset 2: class range out of order");
}

}  // namespace
}  // namespace lockstep::constraints
