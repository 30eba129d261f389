#include "server/reasoning_budget.h"

#include <limits>
#include <string>

#include "core/error.h"
#include "server/api_error.h"
#include "server/constraint_cache.h"

namespace lockstep::server {

namespace {

constexpr const char* kFields[] = {"reasoning_budget", "thinking_budget_tokens", "thinking_token_budget"};

}  // namespace

const char* reasoning_budget_field(const Body& body) {
  for (const char* f : kFields)
    if (has(body, f)) return f;
  return kFields[0];
}

std::optional<int64_t> parse_reasoning_budget(const Body& body) {
  std::optional<int64_t> out;
  const char* first = nullptr;
  for (const char* f : kFields) {
    const auto v = get_int(body, f, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    if (!v) continue;
    if (*v < -1)
      bad_field(f, "must be -1 (no limit) or a number of tokens >= 0, got " + std::to_string(*v), "out_of_range");
    // Clients that send two spellings to reach several engines send the same number.
    if (out && *out != *v)
      bad_field(f, std::to_string(*v) + " differs from " + first + " " + std::to_string(*out) +
                       " (the same budget under two names)", "invalid_value");
    if (!out) first = f;
    out = v;
  }
  return out;
}

std::shared_ptr<const constraints::ReasoningBudget> chat_reasoning_budget(const Body& body, ReasoningMode mode,
                                                                          const ServingContext& ctx) {
  const int64_t budget = parse_reasoning_budget(body).value_or(ctx.config.default_reasoning_budget);
  // kOff: the tokenizer has no visible think tags, so no answer holds a block to limit.
  if (budget < 0 || mode == ReasoningMode::kOff || !ctx.tokenizer || !ctx.constraints) return nullptr;
  constraints::ReasoningBudgetSpec spec;
  spec.budget = budget;
  spec.start = mode == ReasoningMode::kOpened ? constraints::ReasoningStart::kOpened
                                              : constraints::ReasoningStart::kOptional;
  spec.close = ctx.tokenizer->encode(kForcedReasoningClose, false);
  try {
    // Only the tokens' bytes matter here (where the tags are), not which ids end the output.
    return constraints::ReasoningBudget::make(std::move(spec), ctx.constraints->vocabulary(true));
  } catch (const Error& e) {
    bad_field(reasoning_budget_field(body), e.what(), "invalid_value");
  }
}

}  // namespace lockstep::server
