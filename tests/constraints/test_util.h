// Helpers shared by the constraint tests.
#pragma once

#include <string_view>

#include "constraints/grammar.h"
#include "constraints/matcher.h"

namespace lockstep::constraints::testing {

// True when the whole of `text` is a sentence of `grammar`.
inline bool matches(const Grammar& grammar, std::string_view text) {
  Matcher m(grammar);
  const auto s = m.advance(m.start(), text);
  return s != Matcher::kDead && m.accepting(s);
}

// True when `text` can be extended to a sentence (every prefix of a sentence is viable).
inline bool viable_prefix(const Grammar& grammar, std::string_view text) {
  Matcher m(grammar);
  return m.advance(m.start(), text) != Matcher::kDead;
}

}  // namespace lockstep::constraints::testing
