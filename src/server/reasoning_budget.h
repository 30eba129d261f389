// The reasoning budget of a chat request: how many tokens a thinking model may write inside its
// reasoning block before the server closes the block for it (constraints/reasoning_budget.h).
// Field names are those clients of other engines send: `reasoning_budget` (llama.cpp's
// --reasoning-budget flag, lockstep's own name), `thinking_budget_tokens` (llama.cpp's request
// field) and `thinking_token_budget` (vLLM's). -1 is no limit; absent is the server's
// --reasoning-budget default.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "constraints/reasoning_budget.h"
#include "server/json_fields.h"
#include "server/reasoning.h"
#include "server/serving_context.h"

namespace lockstep::server {

// The text forced when the budget is spent, as Qwen documents it for its thinking models.
inline constexpr const char* kForcedReasoningClose = "\n</think>\n\n";

// The budget the request sets with any of the field names: nullopt when none is sent. A value
// that is not an integer, is below -1, or differs between two of the names is a 400 naming the
// field.
std::optional<int64_t> parse_reasoning_budget(const Body& body);

// The budget a chat request decodes under: the request's (or the server default's) limit when
// it is >= 0 and the answer can hold a reasoning block (mode not kOff); else null.
std::shared_ptr<const constraints::ReasoningBudget> chat_reasoning_budget(const Body& body, ReasoningMode mode,
                                                                          const ServingContext& ctx);

// The field the request set, for errors that concern the budget as a whole ("reasoning_budget"
// when none was sent).
const char* reasoning_budget_field(const Body& body);

}  // namespace lockstep::server
