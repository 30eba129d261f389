#include "constraints/reasoning_prefix.h"

#include <string>

#include "constraints/gbnf.h"

namespace lockstep::constraints {

namespace {

// GBNF for "any text that does not contain `close`, then `close`": the states of the string
// matcher for `close` (every character of "</think>" differs, so a mismatch restarts at state
// 1 on '<' and at state 0 otherwise). Each rule consumes one character and names the next state.
std::string text_then(const std::string& close) {
  std::string g;
  auto state = [](size_t i) { return "reason-" + std::to_string(i); };
  auto literal = [](char c) {
    std::string s(1, '"');
    if (c == '"' || c == '\\') s.push_back('\\');
    s.push_back(c);
    s.push_back('"');
    return s;
  };
  auto cls = [](char c) {
    std::string s;
    if (c == ']' || c == '\\' || c == '-' || c == '^' || c == '[' || c == '/') s.push_back('\\');
    s.push_back(c);
    return s;
  };
  const char open = close[0];
  for (size_t i = 0; i < close.size(); ++i) {
    g.append(state(i)).append(" ::= ").append(literal(close[i]));
    if (i + 1 < close.size()) g.append(" ").append(state(i + 1));
    if (i > 0) g.append(" | ").append(literal(open)).append(" ").append(state(1));
    g.append(" | [^").append(cls(open));
    if (i > 0) g.append(cls(close[i]));
    g.append("] ").append(state(0)).append("\n");
  }
  return g;
}

}  // namespace

Grammar concatenate(const Grammar& first, const Grammar& second) {
  Grammar g = first;
  const uint32_t sets = static_cast<uint32_t>(first.byte_sets.size());
  const uint32_t rules = static_cast<uint32_t>(first.rule_alts.size());
  const uint32_t elems = static_cast<uint32_t>(first.elements.size());
  g.byte_sets.insert(g.byte_sets.end(), second.byte_sets.begin(), second.byte_sets.end());
  for (Element e : second.elements) {
    if (e.kind == Element::Kind::kBytes) e.value += sets;
    else if (e.kind == Element::Kind::kRule) e.value += rules;
    g.elements.push_back(e);
  }
  for (const auto& alts : second.rule_alts) {
    std::vector<uint32_t> shifted;
    for (uint32_t a : alts) shifted.push_back(a + elems);
    g.rule_alts.push_back(std::move(shifted));
  }
  for (const std::string& n : second.rule_names) g.rule_names.push_back("answer-" + n);
  // The new root: one alternative, first's root then second's.
  const uint32_t start = static_cast<uint32_t>(g.elements.size());
  g.elements.push_back({Element::Kind::kRule, first.root});
  g.elements.push_back({Element::Kind::kRule, second.root + rules});
  g.elements.push_back({Element::Kind::kEnd, 0});
  g.rule_alts.push_back({start});
  g.rule_names.push_back("root-after-reasoning");
  g.root = static_cast<uint32_t>(g.rule_alts.size() - 1);
  return g;
}

Grammar after_reasoning(const Grammar& inner, ReasoningStart start) {
  const std::string body = text_then("</think>");
  // Bounded, as JSON's whitespace is (JsonSchemaOptions::max_whitespace): with any amount
  // allowed, a model that keeps writing newlines or tabs never reaches the answer.
  const std::string ws = "reason-ws ::= [ \\t\\r\\n]{0," + std::to_string(kReasoningSpace) + "}\n";
  const std::string root = start == ReasoningStart::kOpened
                               ? "root ::= reason-0 reason-ws\n"
                               : "root ::= (reason-ws \"<think>\" reason-0)? reason-ws\n";
  return concatenate(parse_gbnf(root + ws + body), inner);
}

}  // namespace lockstep::constraints
