// A constraint that applies after a thinking model's reasoning block: the reasoning is free text,
// the answer after "</think>" follows the inner grammar. The server uses it when a chat answer's
// reasoning is split into reasoning_content, so a response_format or a forced tool call governs
// content and never the reasoning (docs/server.md, "Reasoning"). The mask is still a pure
// function of the token prefix: the prefix is part of the grammar.
#pragma once

#include "constraints/grammar.h"

namespace lockstep::constraints {

enum class ReasoningStart {
  kOpened,    // the prompt ends inside "<think>": reasoning text, "</think>", then the answer
  kOptional,  // the answer may open with whitespace and one "<think>...</think>" block
};

// Whitespace allowed before "<think>" and between "</think>" and the answer: Qwen's templates
// write "\n\n" there, and more is only layout, which the reasoning split drops anyway.
inline constexpr int kReasoningSpace = 4;

// The grammar (prefix) then `inner`: prefix = [any text without "</think>"] "</think>" ws for
// kOpened, (ws "<think>" [any text without "</think>"] "</think>")? ws for kOptional, where ws
// is [ \t\r\n]{0,kReasoningSpace}.
Grammar after_reasoning(const Grammar& inner, ReasoningStart start);

// The grammar `first` then `second` (a new root: first's root, then second's).
Grammar concatenate(const Grammar& first, const Grammar& second);

}  // namespace lockstep::constraints
