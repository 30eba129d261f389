// A drafter proposes tokens that probably follow a sequence; the target model verifies them in
// one forward and keeps only what its own sampler rule would have chosen (speculative.cpp), so a
// drafter can change speed, never text. Drafters know nothing of the verify rule.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lockstep {

class SequenceState;

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Up to k tokens to follow `history` (prompt and output so far; its last token has been chosen
  // but not yet run through the target). `prompt_len` leading tokens are the prompt. A drafter
  // that keeps state re-synchronises from `history` itself: earlier drafts may have been rejected.
  virtual std::vector<int32_t> propose(std::span<const int32_t> history, int64_t prompt_len,
                                       int k) = 0;

  // Drafters that read the target's hidden states (MTP) get, after every target forward, the
  // final-normed hidden rows for positions first_position, first_position + 1, ...; rows past what
  // was accepted are overwritten by later calls before they are read.
  virtual bool needs_hidden() const { return false; }
  virtual void observe_hidden(int64_t /*first_position*/, std::span<const float> /*rows*/) {}
  // The target sequence whose decoder this drafter serves (drafters that read the target's KV
  // cache, the Gemma 4 assistant, keep it; they must only read it).
  virtual void bind_target(const SequenceState* /*target*/) {}
  // The target sequence's state was dropped (the scheduler preempted it to free KV memory): let
  // go of the state derived from it (the drafter's own KV). The next propose() re-synchronises
  // from the history once the target has re-run it (observe_hidden delivers every row again).
  // Drafts never decide tokens, so what a drafter keeps or drops changes acceptance at most.
  virtual void forget() {}
};

}  // namespace lockstep
