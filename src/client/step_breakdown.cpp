#include "client/step_breakdown.h"

#include <algorithm>
#include <array>

namespace lockstep::client {

namespace {

constexpr std::string_view kPhasePrefix = "lockstep_step_seconds_total{phase=\"";
constexpr std::array<std::string_view, 5> kLoopOrder = {"admit", "build", "forward", "consume", "retire"};

double delta(const MetricSamples& before, const MetricSamples& after, const std::string& key) {
  const auto a = after.find(key);
  if (a == after.end()) return 0;
  const auto b = before.find(key);
  return a->second - (b == before.end() ? 0 : b->second);
}

size_t loop_position(const std::string& phase) {
  return static_cast<size_t>(std::find(kLoopOrder.begin(), kLoopOrder.end(), phase) - kLoopOrder.begin());
}

}  // namespace

double StepBreakdown::busy_seconds() const {
  double s = 0;
  for (const auto& [name, seconds] : phase_seconds) s += seconds;
  return s;
}

std::optional<StepBreakdown> step_breakdown(const MetricSamples& before, const MetricSamples& after) {
  if (!after.count("lockstep_steps_total")) return std::nullopt;
  StepBreakdown b;
  b.steps = delta(before, after, "lockstep_steps_total");
  b.rows = delta(before, after, "lockstep_batch_rows_total");
  b.sequences = delta(before, after, "lockstep_step_sequences_total");
  b.idle_seconds = delta(before, after, "lockstep_engine_idle_seconds_total");
  b.http_stream_seconds = delta(before, after, "lockstep_http_stream_seconds_total");
  for (const auto& [key, value] : after) {
    if (key.rfind(kPhasePrefix, 0) != 0 || key.size() < kPhasePrefix.size() + 2) continue;
    const std::string phase = key.substr(kPhasePrefix.size(), key.size() - kPhasePrefix.size() - 2);
    b.phase_seconds.emplace_back(phase, delta(before, after, key));
  }
  std::stable_sort(b.phase_seconds.begin(), b.phase_seconds.end(), [](const auto& x, const auto& y) {
    return loop_position(x.first) < loop_position(y.first);
  });
  return b;
}

}  // namespace lockstep::client
