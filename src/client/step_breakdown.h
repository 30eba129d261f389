// The serving engine's per-step time breakdown over one benchmark level: the difference of two
// /metrics scrapes of lockstep's step profile (lockstep_step_seconds_total{phase=...},
// lockstep_steps_total, ...; src/scheduler/step_profile.h), turned into milliseconds per step.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::client {

using MetricSamples = std::map<std::string, double>;  // parse_prometheus_text's

struct StepBreakdown {
  double steps = 0;
  double rows = 0, sequences = 0;  // token rows and sequences over the steps' forwards
  // Seconds per phase in the engine loop's order (admit, build, forward, consume, retire; a
  // phase this client does not know comes after them).
  std::vector<std::pair<std::string, double>> phase_seconds;
  double idle_seconds = 0;         // the engine waiting for work with nothing running
  double http_stream_seconds = 0;  // HTTP threads turning events into SSE bytes
  double busy_seconds() const;     // the phases' sum
  double ms_per_step(double seconds) const { return steps > 0 ? 1000 * seconds / steps : 0; }
};

// `after` minus `before`; nullopt when the server publishes no step profile.
std::optional<StepBreakdown> step_breakdown(const MetricSamples& before, const MetricSamples& after);

}  // namespace lockstep::client
