// GBNF parser and byte matcher: sentences accepted, non-sentences refused, errors located.
#include "constraints/gbnf.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"

namespace lockstep::constraints {
namespace {

using testing::matches;
using testing::viable_prefix;

std::string error_of(std::string_view text) {
  try {
    parse_gbnf(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gbnf, LiteralsAlternationAndGrouping) {
  const Grammar g = parse_gbnf(R"(root ::= "yes" | "no" | ("may" "be"))");
  EXPECT_TRUE(matches(g, "yes"));
  EXPECT_TRUE(matches(g, "no"));
  EXPECT_TRUE(matches(g, "maybe"));
  EXPECT_FALSE(matches(g, "ye"));
  EXPECT_TRUE(viable_prefix(g, "ye"));
  EXPECT_FALSE(matches(g, "yess"));
  EXPECT_FALSE(viable_prefix(g, "x"));
}

TEST(Gbnf, RepetitionOperators) {
  const Grammar g = parse_gbnf(
      "root ::= a b c d\n"
      "a ::= \"a\"*\n"
      "b ::= \"b\"+\n"
      "c ::= \"c\"?\n"
      "d ::= \"d\"{2,3}\n");
  EXPECT_TRUE(matches(g, "bdd"));
  EXPECT_TRUE(matches(g, "aaabbcddd"));
  EXPECT_FALSE(matches(g, "add"));       // b+ needs one b
  EXPECT_FALSE(matches(g, "bccdd"));     // c? at most one
  EXPECT_FALSE(matches(g, "bd"));        // d{2,3} at least two
  EXPECT_FALSE(matches(g, "bdddd"));     // and at most three
  const Grammar exact = parse_gbnf("root ::= [0-9]{3}");
  EXPECT_TRUE(matches(exact, "123"));
  EXPECT_FALSE(matches(exact, "12"));
  EXPECT_FALSE(matches(exact, "1234"));
  const Grammar open = parse_gbnf("root ::= \"x\"{2,}");
  EXPECT_FALSE(matches(open, "x"));
  EXPECT_TRUE(matches(open, "xxxxxxx"));
}

TEST(Gbnf, CharacterClassesAreCodePoints) {
  const Grammar g = parse_gbnf(R"(root ::= [a-cé] [^"\\a-z]+)");
  EXPECT_TRUE(matches(g, "b12"));
  EXPECT_TRUE(matches(g, "é€😀"));  // 2-, 3- and 4-byte characters in the negated class
  EXPECT_FALSE(matches(g, "bq"));
  EXPECT_FALSE(matches(g, "b\""));
  EXPECT_FALSE(matches(g, "d1"));
  // Bytes that are not UTF-8 are not characters.
  EXPECT_FALSE(matches(g, "a\xff"));
  EXPECT_FALSE(matches(g, "a\xed\xa0\x80"));  // an encoded surrogate
  // A prefix that ends inside a character stays viable.
  EXPECT_TRUE(viable_prefix(g, "a\xe2\x82"));
}

TEST(Gbnf, EscapesCommentsAndMultiLineRules) {
  const Grammar g = parse_gbnf(
      "# a comment\n"
      "root ::= \"\\x41\\u00e9\\n\\\"\" # trailing comment\n"
      "   | item\n"
      "     item\n"
      "item ::= [\\]\\-]\n");
  EXPECT_TRUE(matches(g, "A\xc3\xa9\n\""));
  EXPECT_TRUE(matches(g, "]-"));
  EXPECT_FALSE(matches(g, "]"));
  const Grammar dot = parse_gbnf("root ::= . .");
  EXPECT_TRUE(matches(dot, "a\xe2\x82\xac"));
  EXPECT_FALSE(matches(dot, "a"));
}

TEST(Gbnf, RecursionNestsAndEnds) {
  const Grammar g = parse_gbnf(
      "root ::= list\n"
      "list ::= \"[\" (item (\",\" item)*)? \"]\"\n"
      "item ::= [0-9]+ | list\n");
  EXPECT_TRUE(matches(g, "[]"));
  EXPECT_TRUE(matches(g, "[1,[2,[3,[]]],45]"));
  EXPECT_FALSE(matches(g, "[1,]"));
  EXPECT_FALSE(matches(g, "[[1]"));
  std::string deep(200, '[');
  deep += std::string(200, ']');
  EXPECT_TRUE(matches(g, deep));
}

TEST(Gbnf, LongRepetitionKeepsTheStackFlat) {
  const Grammar g = parse_gbnf("root ::= [a-z]* \"!\"");
  Matcher m(g);
  auto s = m.start();
  for (int i = 0; i < 10000; ++i) s = m.advance(s, 'q');
  const size_t stacks = m.stack_count();
  s = m.advance(s, std::string_view("qqqq"));
  EXPECT_EQ(m.stack_count(), stacks);  // the loop revisits the same interned stacks
  s = m.advance(s, '!');
  EXPECT_TRUE(m.accepting(s));
}

TEST(Gbnf, ErrorsNameLineColumnAndWhatWasExpected) {
  EXPECT_EQ(error_of("root ::= \"a\"\nfoo ::= (\"b\""),
            "grammar line 2 column 13: expected ')', found the end of the grammar");
  EXPECT_EQ(error_of("root ::= \"a\" ]"),
            "grammar line 1 column 14: expected a literal, a character class, '(', '.' or a rule "
            "name, found ']'");
  EXPECT_EQ(error_of("root = \"a\""), "grammar line 1 column 6: expected '::=' after the rule name 'root', found '='");
  EXPECT_EQ(error_of("root ::= thing"),
            "grammar line 1 column 10: expected a definition of rule 'thing', found none");
  EXPECT_EQ(error_of("start ::= \"a\""), "grammar: no 'root' rule (the start rule must be named root)");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""),
            "grammar line 2 column 1: expected one definition of rule 'root', found a second one");
  EXPECT_EQ(error_of("root ::= \"\\q\""),
            "grammar line 1 column 11: expected an escape (\\n \\r \\t \\\\ \\\" \\[ \\] \\- \\xHH "
            "\\uHHHH \\UHHHHHHHH), found '\\'");
  EXPECT_EQ(error_of("root ::= [z-a]"),
            "grammar line 1 column 14: expected a range whose end is not below its start, found ']'");
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left recursion (root -> root)"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= x\nx ::= \"\"? root | \"a\"").find("left recursion"), std::string::npos);
}

TEST(Gbnf, UnsatisfiableBranchesArePrunedAndAnEmptyLanguageRefused) {
  const Grammar g = parse_gbnf("root ::= \"a\" | loop\nloop ::= \"b\" loop");
  EXPECT_TRUE(matches(g, "a"));
  EXPECT_FALSE(viable_prefix(g, "b"));  // `loop` derives no finite string: pruned
  EXPECT_NE(error_of("root ::= []").find(kEmptyLanguage), std::string::npos);
}

}  // namespace
}  // namespace lockstep::constraints
