// Regular expressions (the ECMAScript flavour JSON Schema's `pattern` uses, a practical subset)
// compiled to grammar expressions:
//   literals; escapes \n \r \t \f \v \0 \xHH \uHHHH \u{H...} and escaped punctuation; classes
//   [a-z] [^...] with \d \w \s \D \W \S inside or outside; `.` (any character but a line
//   terminator: \n \r U+2028 U+2029); groups ( ) (?: ) (?<name> ); alternation |; quantifiers
//   * + ? {m} {m,} {m,n}, lazy forms ending in ? (same language); ^ at the start and $ at the
//   end of a top-level alternative.
// Refused with an error naming the offset: lookaround, backreferences, \b \B, ^/$ elsewhere.
// Characters are code points; `encode` turns each set of them into the bytes to match (plain
// UTF-8 for a regex constraint, JSON string escapes inside a JSON Schema string).
#pragma once

#include <functional>
#include <string_view>

#include "constraints/grammar.h"

namespace lockstep::constraints {

enum class RegexAnchoring {
  kFullMatch,  // the whole text must match; ^ and $ are allowed and change nothing
  kSearch,     // JSON Schema `pattern`: a match anywhere; an alternative without ^ (or $) may
               // have any characters before (or after) it
};

using CharEncoder = std::function<ExprPtr(const CodepointSet&)>;

// Throws lockstep::Error "regex at offset N: ..." naming what is unsupported or malformed.
ExprPtr regex_expr(std::string_view pattern, RegexAnchoring anchoring, const CharEncoder& encode);

// A constraint that the whole output match `pattern` (as UTF-8 text).
Grammar compile_regex(std::string_view pattern);

}  // namespace lockstep::constraints
