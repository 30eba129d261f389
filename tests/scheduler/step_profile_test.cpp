// The engine's step profile on its own (no model): phase times accumulate per step and reach the
// queue's metrics at each step's end, rows and sequences are counted from the forward's items,
// and time the queue spent waiting for work is idle time, never admission.
#include <gtest/gtest.h>

#include <thread>

#include "models/model.h"
#include "scheduler/request_queue.h"
#include "scheduler/step_profile.h"

namespace lockstep {
namespace {

using std::chrono::milliseconds;

double phase_seconds(const EngineMetrics& m, StepPhase p) { return m.steps.seconds[static_cast<size_t>(p)]; }

TEST(StepProfile, PhasesAccumulateAndArePublishedAtTheStepsEnd) {
  RequestQueue q(4);
  StepProfile profile(q);
  const std::vector<int32_t> prefill = {1, 2, 3}, decode = {4};
  std::vector<ForwardItem> items(2);
  items[0].tokens = prefill;
  items[1].tokens = decode;

  profile.start_step();
  std::this_thread::sleep_for(milliseconds(2));
  profile.phase(StepPhase::Forward);
  std::this_thread::sleep_for(milliseconds(5));
  profile.phase(StepPhase::Retire);
  EXPECT_EQ(q.metrics().steps.steps, 0u) << "nothing is published before the step ends";
  profile.end_step(items);

  const EngineMetrics m = q.metrics();
  EXPECT_EQ(m.steps.steps, 1u);
  EXPECT_EQ(m.steps.sequences, 2u);
  EXPECT_GE(phase_seconds(m, StepPhase::Admit), 0.002);
  EXPECT_GE(phase_seconds(m, StepPhase::Forward), 0.005);
  EXPECT_EQ(phase_seconds(m, StepPhase::Build), 0);

  profile.start_step();  // a turn that finds nothing to run is dropped by the next start
  std::this_thread::sleep_for(milliseconds(5));
  profile.start_step();
  profile.end_step({});
  EXPECT_EQ(q.metrics().steps.steps, 2u);
  EXPECT_LT(phase_seconds(q.metrics(), StepPhase::Admit) - phase_seconds(m, StepPhase::Admit), 0.004);
  EXPECT_STREQ(step_phase_name(StepPhase::Consume), "consume");
}

TEST(StepProfile, WaitingForWorkIsIdleNotAdmission) {
  RequestQueue q(4);
  StepProfile profile(q);
  profile.start_step();
  EXPECT_TRUE(q.pop(1, true, milliseconds(30)).empty());  // the engine waits: nothing is running
  profile.phase(StepPhase::Build);
  profile.end_step({});
  const EngineMetrics m = q.metrics();
  EXPECT_GE(m.idle_seconds, 0.03);
  EXPECT_LT(phase_seconds(m, StepPhase::Admit), 0.01);
  // pop without waiting adds no idle time
  EXPECT_TRUE(q.pop(1, false, milliseconds(30)).empty());
  EXPECT_DOUBLE_EQ(q.metrics().idle_seconds, m.idle_seconds);
}

}  // namespace
}  // namespace lockstep
