// The one prefill path. A prompt enters a sequence's state only through prefill_item(): the
// decoder (CLI, batched generation, the server's scheduler), the draft model's catch-up and
// `score` all take their chunks from it, whole or chunked, after a prefix-cache hit or not.
#pragma once

#include <span>

#include "models/model.h"

namespace lockstep {

enum class PrefillRows {
  None,        // no output rows (re-feeding a history whose next token is already chosen)
  Last,        // logits of the prompt's last token only
  FinalChunk,  // logits of every token of the final chunk (pass chunk 0 for every position)
  Every,       // logits and hidden of every token of every chunk (drafters that read hiddens)
};

// The item that feeds the next chunk of `prompt` to `seq`: the prompt's tokens from position
// seq.length on (positions below it are already in the cache), at most `chunk` of them (0: all).
ForwardItem prefill_item(SequenceState& seq, std::span<const int32_t> prompt, int64_t chunk,
                         PrefillRows rows);

// Feeds the rest of `prompt` (from seq.length) chunk by chunk; returns the final call's outputs.
// With `final_choose` (one rule per output row of the final call) the backend chooses those rows'
// tokens (ForwardResult::tokens) and the final call returns neither logits nor hidden states.
ForwardResult prefill(Model& model, SequenceState& seq, std::span<const int32_t> prompt,
                      int64_t chunk = 0, PrefillRows rows = PrefillRows::Last,
                      std::span<const kernels::TokenRule> final_choose = {});

}  // namespace lockstep
