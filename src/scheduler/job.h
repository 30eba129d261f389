// One request inside the engine, from the queue to its finish event. Once first admitted it owns
// its decoder, which it keeps while preempted: the history, sampler, constraint and stop state
// that decide its remaining tokens never leave it, only its KV does.
#pragma once

#include <memory>

#include "decode/sequence_decoder.h"
#include "decode/speculative/drafter.h"
#include "scheduler/request_queue.h"

namespace lockstep {

struct Job {
  EngineRequest request;
  std::shared_ptr<RequestStream> stream;
  std::unique_ptr<Drafter> drafter;          // declared before the decoder, which points at it
  std::unique_ptr<SequenceDecoder> decoder;  // null until first admitted
  int64_t cached_tokens = 0;   // prompt tokens reused from the prefix cache at first admission
  // Blocks its last failed admission needed (reserve included); it is not tried again (its cache
  // lookup is not repeated) until that many are free or freeable, or nothing else runs.
  int64_t blocked_on = 0;
  bool cache_prefill = true;   // offer its state to the prefix cache when its (re)fill ends
  int64_t forward_index = -1;  // its item in the current step's forward, or -1
  bool was_prefilling = false; // its item in the current step was a prefill chunk
  bool errored = false;        // its finish event (an error) has been sent

  bool admitted() const { return decoder != nullptr; }
  // Drafters that read the target's hidden rows need every position computed here, so such a
  // job cannot start from cached KV.
  bool reads_hidden() const { return drafter && drafter->needs_hidden(); }
};

}  // namespace lockstep
