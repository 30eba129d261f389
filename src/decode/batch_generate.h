// Classic decode of several requests stepping together: prompts are prefilled in shared forward
// calls and every decode forward carries one token of each unfinished sequence. The generation
// gate uses it to prove that a request's tokens do not depend on its batch.
#pragma once

#include <span>
#include <vector>

#include "decode/generate.h"

namespace lockstep {

// Stops at eos ids and max_tokens (stop strings and drafters are not used here).
std::vector<GenerateResult> generate_batch(Model& model,
                                           std::span<const std::vector<int32_t>> prompts,
                                           const GenerateOptions& options);

}  // namespace lockstep
