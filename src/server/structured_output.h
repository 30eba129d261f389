// response_format -> the constraint a request decodes under. OpenAI's types (text, json_object,
// json_schema) and lockstep's extensions (regex, grammar) become a ConstraintSpec, compiled over
// the served model's vocabulary (ConstraintCache) and attached to GenerateOptions::constraint;
// the decoder then masks every position by the exact token prefix, so the constrained text is
// the same with and without speculation, alone or batched (docs/constraints.md).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "constraints/constraint.h"
#include "server/json_fields.h"
#include "server/serving_context.h"

namespace lockstep::server {

struct ResponseFormat {
  constraints::ConstraintSpec spec;
  std::string field;  // the field a compile error is reported against
};

// The constraint `response_format` asks for; nullopt when absent, null or {"type": "text"}.
// Shape errors are a 400 naming the nested field (response_format.json_schema.schema, ...).
std::optional<ResponseFormat> parse_response_format(const Body& body);

// Compiles (or finds in ctx.constraints) the format's constraint. A compile error (bad schema,
// unsupported keyword, bad grammar or regex) is a 400 naming ResponseFormat::field, with the
// constraint engine's message (which names the place: "json schema at /properties/x: ...").
std::shared_ptr<const constraints::Constraint> compile_response_format(const ResponseFormat& f,
                                                                      const ServingContext& ctx,
                                                                      bool with_eos);

}  // namespace lockstep::server
