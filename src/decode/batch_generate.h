// Several requests stepping together: every forward carries the next item (prefill chunk, or last
// token plus drafts) of each unfinished sequence. The generation gate uses it to prove that a
// request's tokens do not depend on its batch.
#pragma once

#include <span>
#include <vector>

#include "decode/generate.h"

namespace lockstep {

// `options.drafter` must be null here (a drafter serves one sequence); everything else applies.
std::vector<GenerateResult> generate_batch(Model& model,
                                           std::span<const std::vector<int32_t>> prompts,
                                           const GenerateOptions& options);

}  // namespace lockstep
