// Where the serving engine's time goes, step by step: accumulated wall time per phase of
// Engine::loop (admission, batch building, the forward, consuming its rows, retiring finished
// sequences), plus how many steps ran and how many rows and sequences they carried. Exposed in
// /metrics (lockstep_step_seconds_total{phase=...}) so a load generator (`lockstep bench-serve`)
// can difference two scrapes and print milliseconds per step by phase.
//
// The engine marks phase boundaries with one call each (start_step, phase, end_step); all the
// bookkeeping is here, so the loop stays readable and the marks survive changes around them.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <span>

namespace lockstep {

class RequestQueue;
struct ForwardItem;

enum class StepPhase {
  Admit,    // taking requests from the queue, admitting them (drafter, prefix-cache lookup, decoder)
  Build,    // each sequence's next item (SequenceDecoder::next_item: drafting happens here)
  Forward,  // Model::forward over the step's items, token choice on the device included
  Consume,  // SequenceDecoder::consume (host sampling, acceptance, stop strings, events) and the
            // prefix-cache snapshots of prompts that just finished prefilling
  Retire,   // finished and cancelled sequences: finish events, KV back to the pool or the cache
};
inline constexpr size_t kStepPhases = 5;

// The name /metrics gives a phase (the `phase` label).
const char* step_phase_name(StepPhase phase);

// Totals since the engine started. A step is one turn of the loop that had sequences to run
// (it runs at most one forward); turns that found nothing to do are idle, not steps.
// (Their token rows are EngineMetrics::batch_rows_total.)
struct StepTotals {
  std::array<double, kStepPhases> seconds{};  // wall seconds per phase, indexed by StepPhase
  uint64_t steps = 0;
  uint64_t sequences = 0;  // items over all forwards (one per sequence that took part)
};

// Engine-thread only. Publishes its totals into the queue's EngineMetrics at each end_step.
class StepProfile {
 public:
  explicit StepProfile(RequestQueue& queue) : queue_(queue) {}

  // Top of a loop turn: a new step begins in the Admit phase; an unfinished previous turn (one
  // that found nothing to run) is dropped.
  void start_step();
  // The current phase ends now and `next` begins.
  void phase(StepPhase next);
  // The turn is over, and it had sequences to run (the engine skips this call otherwise): its
  // phase times join the totals, `items` being its forward's (empty when none ran). Time the
  // queue spent blocked waiting for work during this turn's admission is idle, not admission.
  void end_step(std::span<const ForwardItem> items);

  const StepTotals& totals() const { return totals_; }

 private:
  using Clock = std::chrono::steady_clock;

  RequestQueue& queue_;
  StepTotals totals_;
  std::array<double, kStepPhases> step_{};  // this turn's phases so far
  StepPhase current_ = StepPhase::Admit;
  Clock::time_point mark_{};
  double idle_at_start_ = 0;  // the queue's idle seconds when this turn began
};

}  // namespace lockstep
