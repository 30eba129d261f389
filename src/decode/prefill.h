// The one prefill path. Everything that feeds a prompt to a model (classic generate, the
// speculative seed, the server, whole or chunked or after a prefix-cache hit) calls this.
#pragma once

#include <span>

#include "models/model.h"

namespace lockstep {

// Appends `tokens` to `seq` in chunks of at most `chunk` tokens (0: one chunk) and returns the
// outputs of the final chunk: logits for its last token (`all_logits`: for every token of the
// final chunk; callers that need every position pass chunk 0).
ForwardResult prefill(Model& model, SequenceState& seq, std::span<const int32_t> tokens,
                      int64_t chunk = 0, bool all_logits = false);

}  // namespace lockstep
