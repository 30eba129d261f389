// Making a drafter by mode name, shared by the CLI and the serving engine so a request means the
// same thing wherever it runs.
#pragma once

#include <memory>
#include <string>

#include "decode/speculative/drafter.h"
#include "models/gemma4_assistant.h"
#include "models/model.h"
#include "sampling/sampler.h"

namespace lockstep {

// Whether `mode` is none, lookup, draft, mtp or assistant.
bool is_spec_mode(const std::string& mode);
// Tokens drafted per round when the user gives no width: from measured acceptance on the shipped
// models (docs/benchmarks.md).
int default_draft_width(const std::string& mode);
// The drafter for `mode` (nullptr for "none"). `draft` is the draft model for "draft" (an Error
// when absent); "mtp" needs target.mtp(); "assistant" needs `assistant`, a Gemma 4 assistant
// loaded for `target` (load_gemma4_assistant).
std::unique_ptr<Drafter> make_drafter(const std::string& mode, Model& target, Model* draft,
                                      const SamplingParams& sampling,
                                      Gemma4Assistant* assistant = nullptr);

}  // namespace lockstep
