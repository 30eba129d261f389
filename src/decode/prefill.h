// The one prefill path. Everything that feeds a prompt to a model (classic generate, drafters,
// batched generation, later the server; whole or chunked) calls prefill_batch.
#pragma once

#include <span>
#include <vector>

#include "models/model.h"

namespace lockstep {

// Appends prompts[i] to seqs[i], all sequences in the same forward calls, in chunks of at most
// `chunk` tokens per sequence (0: whole). Returns the outputs of the last call: each sequence's
// logits for its final token (`all_logits`: for every token of its final chunk; pass chunk 0 to
// get every position). Sequences whose prompt ends earlier stop joining the calls.
ForwardResult prefill_batch(Model& model, std::span<SequenceState* const> seqs,
                            std::span<const std::span<const int32_t>> prompts, int64_t chunk = 0,
                            bool all_logits = false);

// One sequence. The result's rows are that sequence's.
ForwardResult prefill(Model& model, SequenceState& seq, std::span<const int32_t> tokens,
                      int64_t chunk = 0, bool all_logits = false);

}  // namespace lockstep
