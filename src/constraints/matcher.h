// The incremental byte matcher: a pushdown automaton run over every parse at once.
//
// A stack is a chain of grammar positions: the top is the element to match next, each entry below
// the position to return to when the rule above it ends. Stacks are hash-consed (interned) into
// an arena, so a stack is one integer and equal stacks are equal integers. A matcher state is the
// sorted set of the "ready" stacks (those whose top is a byte set) reachable after the bytes so
// far, also interned, so a state is one integer too.
//
// Advancing by a byte moves each ready stack whose top accepts the byte one element on, then
// expands the result (enter rules, return from ended ones) until every stack is ready again.
// A rule reference that ends its alternative is a tail call (no return entry), so repetitions
// (S ::= x S | ()) run in constant stack depth. Expansions, states and transitions are memoised in
// the arena; none of it changes what a state means, so results never depend on what was cached.
//
// Two pseudo-stacks may appear in a state: kBottom (every rule has returned: the grammar has
// completed, so the text may end here) and kUnknown (a rule returned into a parent that the
// caller left unknown; used by the context-independent token walks in token_mask.cpp).
//
// Not thread-safe: one Matcher per sequence (and per thread).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "constraints/grammar.h"

namespace lockstep::constraints {

class Matcher {
 public:
  using StackId = uint32_t;
  using StateId = uint32_t;
  static constexpr StackId kBottom = 0;
  static constexpr StackId kUnknown = 1;
  static constexpr StateId kDead = 0;  // the empty set: no parse survives

  explicit Matcher(const Grammar& grammar);

  const Grammar& grammar() const { return grammar_; }

  // The state before any byte: the root rule entered.
  StateId start();
  // kDead when no stack of `state` accepts `byte` (then nothing is consumed).
  StateId advance(StateId state, uint8_t byte);
  StateId advance(StateId state, std::string_view bytes);

  // Sorted stack ids; kBottom / kUnknown included when present.
  std::span<const StackId> stacks(StateId state) const { return sets_[state]; }
  bool accepting(StateId state) const { return !sets_[state].empty() && sets_[state][0] == kBottom; }
  bool reached_unknown(StateId state) const;
  // True when some stack can still consume a byte.
  bool has_ready(StateId state) const;

  // Stack arena.
  StackId push(uint32_t position, StackId parent);
  uint32_t position(StackId s) const { return nodes_[s].position; }
  StackId parent(StackId s) const { return nodes_[s].parent; }
  // The state holding exactly the expansion of `s` (s itself when its top is a byte set).
  StateId state_of(StackId s);

  size_t stack_count() const { return nodes_.size(); }
  size_t state_count() const { return sets_.size(); }

 private:
  struct Node {
    uint32_t position;
    StackId parent;
  };
  struct VecHash {
    size_t operator()(const std::vector<uint32_t>& v) const;
  };

  // The ready stacks (and pseudo-stacks) that `s` expands to; memoised.
  const std::vector<StackId>& expand(StackId s);
  StateId intern(std::vector<uint32_t>& set);  // sorts and deduplicates `set` first

  const Grammar& grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, StackId> node_index_;
  std::vector<std::vector<StackId>> expansions_;
  std::vector<char> expanded_;
  std::vector<std::vector<StackId>> sets_;
  std::unordered_map<std::vector<uint32_t>, StateId, VecHash> set_index_;
  std::unordered_map<uint64_t, StateId> transitions_;
  std::vector<uint32_t> scratch_;
  StateId start_ = UINT32_MAX;
};

}  // namespace lockstep::constraints
