// GBNF, the grammar syntax of llama.cpp (grammars/README.md there), which users already write:
//
//   root   ::= object               # the start rule is always `root`
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//   pair   ::= [a-z]+ ":" ws [0-9]{1,3}
//   ws     ::= [ \t\n]*
//
// Terminals are "literals" and [character classes] (ranges, ^ negation), `.` is any character;
// escapes \n \r \t \\ \" \[ \] \- \/ \xHH \uHHHH \UHHHHHHHH; grouping ( ), alternation |,
// repetition * + ? {m} {m,} {m,n}; # comments to the end of the line. A rule may span lines: it
// ends where the next `name ::=` begins. Rule names are letters, digits, '-' and '_'.
// Characters are Unicode code points, matched as their UTF-8 bytes.
#pragma once

#include <string_view>

#include "constraints/grammar.h"

namespace lockstep::constraints {

// Throws lockstep::Error "grammar line L column C: expected ..., found ..." on a syntax error,
// naming the rule for an undefined or twice-defined rule or left recursion.
Grammar parse_gbnf(std::string_view text);

}  // namespace lockstep::constraints
