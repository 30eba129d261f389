// JSON Schema to grammar. What is supported, how each keyword is made exact, and the whitespace
// policy are documented in docs/constraints.md; in short:
//   type (and type lists), properties / required / additionalProperties (false or a schema),
//   enum / const, items / prefixItems / additionalItems / minItems / maxItems, anyOf, oneOf
//   (when its branches are provably exclusive), allOf (when it can be merged), $ref to local
//   pointers with $defs / definitions (recursion included), minLength / maxLength, pattern,
//   format (date, time, date-time, uuid, email, ipv4, hostname-free subset; see formats),
//   integer minimum / maximum / exclusiveMinimum / exclusiveMaximum, booleans as schemas.
// Anything else is refused: "json schema at <pointer>: unsupported keyword '<k>'".
//
// Output form: object members in the schema's `properties` order (then other keys), strings
// with JSON's short escapes (\" \\ \b \f \n \r \t), other control characters as \u00xx and
// everything else as UTF-8, numbers without leading zeros. Whitespace: see max_whitespace.
#pragma once

#include <string_view>

#include "constraints/grammar.h"

namespace lockstep::constraints {

struct JsonSchemaOptions {
  // Whitespace characters (space, \t, \n, \r) allowed at each place JSON allows them, e.g. after
  // ':' and ','. 0 (the default): compact output. Bounded, so a model cannot emit whitespace
  // forever.
  int max_whitespace = 0;
  enum class Dialect {
    kAuto,     // from "$schema": drafts 4 to 7 ignore the siblings of $ref; otherwise 2020-12
    kDraft7,   // $ref overrides its siblings; "items": [...] is a tuple with additionalItems
    k2020_12,  // $ref applies together with its siblings; prefixItems is the tuple
  };
  Dialect dialect = Dialect::kAuto;
  // oneOf means "exactly one branch matches". By default a oneOf whose branches are not provably
  // exclusive is refused; true treats it as anyOf (may accept an instance matching two branches).
  bool one_of_as_any_of = false;
};

// Throws lockstep::Error naming the JSON pointer and keyword on anything unsupported or invalid.
Grammar compile_json_schema(std::string_view schema_json, const JsonSchemaOptions& options);

}  // namespace lockstep::constraints
