// A constraint after a reasoning block: the block is free text up to the first "</think>" (any
// near miss of the tag inside it included), the answer after it follows the inner grammar.
#include "constraints/reasoning_prefix.h"

#include <gtest/gtest.h>

#include <string>

#include "constraints/constraint.h"
#include "constraints/gbnf.h"
#include "test_util.h"

namespace lockstep::constraints {
namespace {

using testing::matches;
using testing::viable_prefix;

TEST(ReasoningPrefix, OpenedBlockThenTheAnswer) {
  const Grammar inner = compile_grammar(ConstraintSpec::json_schema(
      R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})"));
  const Grammar g = after_reasoning(inner, ReasoningStart::kOpened);
  EXPECT_TRUE(matches(g, "let me think</think>\n\n{\"a\":1}"));
  EXPECT_TRUE(matches(g, "</think>{\"a\":2}"));
  // Near misses of the closing tag are reasoning text, not the end of it.
  EXPECT_TRUE(matches(g, "a < b, </thin, <</think, </think >, <t</think>{\"a\":3}"));
  EXPECT_TRUE(viable_prefix(g, "{\"a\":1} is not the answer yet"));
  EXPECT_FALSE(matches(g, "{\"a\":1}"));                    // the block must close first
  EXPECT_FALSE(matches(g, "done</think> not json"));          // after it, the inner grammar
  EXPECT_FALSE(viable_prefix(g, "done</think>{\"a\":\"x\""));
  EXPECT_FALSE(matches(g, "x</think>{\"a\":1}</think>"));  // one block only
  // Up to kReasoningSpace whitespace characters between the block and the answer, no more.
  EXPECT_TRUE(matches(g, "x</think> \t\r\n{\"a\":1}"));
  EXPECT_FALSE(viable_prefix(g, "x</think>\n\n\n\n\n"));
}

TEST(ReasoningPrefix, OptionalBlockMayBeSkipped) {
  const Grammar inner = parse_gbnf(R"(root ::= "yes" | "no")");
  const Grammar g = after_reasoning(inner, ReasoningStart::kOptional);
  EXPECT_TRUE(matches(g, "yes"));
  EXPECT_TRUE(matches(g, "\n<think>\nhmm: yes or no?\n</think>\n\nno"));
  EXPECT_FALSE(matches(g, "<think>unclosed yes"));
  EXPECT_FALSE(matches(g, "maybe"));
  EXPECT_FALSE(matches(g, "<think></think>maybe"));
  EXPECT_TRUE(matches(g, "\n\n\n\n<think>x</think>\n\n\n\nyes"));
  EXPECT_FALSE(viable_prefix(g, "\n\n\n\n\n"));
}

TEST(ReasoningPrefix, ConcatenationKeepsBothGrammars) {
  const Grammar g = concatenate(parse_gbnf(R"(root ::= [a-c]+)"), parse_gbnf(R"(root ::= "-" [0-9]{2})"));
  EXPECT_TRUE(matches(g, "abca-42"));
  EXPECT_FALSE(matches(g, "-42"));
  EXPECT_FALSE(matches(g, "ab-4"));
}

}  // namespace
}  // namespace lockstep::constraints
