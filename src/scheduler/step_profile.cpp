#include "scheduler/step_profile.h"

#include <algorithm>

#include "models/model.h"
#include "scheduler/request_queue.h"

namespace lockstep {

const char* step_phase_name(StepPhase phase) {
  switch (phase) {
    case StepPhase::Admit: return "admit";
    case StepPhase::Build: return "build";
    case StepPhase::Forward: return "forward";
    case StepPhase::Consume: return "consume";
    case StepPhase::Retire: return "retire";
  }
  return "unknown";
}

void StepProfile::start_step() {
  step_.fill(0);
  current_ = StepPhase::Admit;
  idle_at_start_ = queue_.waited_seconds();
  mark_ = Clock::now();
}

void StepProfile::phase(StepPhase next) {
  const Clock::time_point now = Clock::now();
  step_[static_cast<size_t>(current_)] += std::chrono::duration<double>(now - mark_).count();
  current_ = next;
  mark_ = now;
}

void StepProfile::end_step(std::span<const ForwardItem> items) {
  phase(current_);  // closes the phase that is running
  // The queue blocks only while nothing runs, so a wait inside this turn came before the
  // request that ended it was admitted: all of it belongs to the idle time, none to admission.
  const double waited = queue_.waited_seconds();
  double& admit = step_[static_cast<size_t>(StepPhase::Admit)];
  admit = std::max(0.0, admit - (waited - idle_at_start_));
  for (size_t p = 0; p < kStepPhases; ++p) totals_.seconds[p] += step_[p];
  ++totals_.steps;
  totals_.sequences += items.size();
  queue_.update([this](EngineMetrics& m) { m.steps = totals_; });
  // What follows until the next start_step (the loop's condition checks) belongs to no step.
  step_.fill(0);
}

}  // namespace lockstep
