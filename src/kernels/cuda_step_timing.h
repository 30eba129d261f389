// Where a replayed decode step's time goes, host against GPU (LOCKSTEP_CUDA_GRAPH_STATS=1, with
// the step counts): per step key, the host's walk through the step's ops up to the graph launch,
// the graph's time on the GPU (CUDA events around the launch), and the period from one replayed
// step's start to the next. period - GPU time is what the GPU sat idle each step, waiting for the
// host (the token's download, the caller's bookkeeping, the next step's walk). Diagnostic only:
// the events sit outside the graph and the end event is complete by the time it is read (a decode
// step downloads its token after the graph), so timing does not change what runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

#include "kernels/cuda/cuda_ops.h"

namespace lockstep::kernels {

class StepTiming {
 public:
  ~StepTiming() {
    for (const auto& [key, s] : keys_) {
      if (s.steps == 0) continue;
      const double n = static_cast<double>(s.steps);
      std::fprintf(stderr,
                   "lockstep cuda step times %s: %lld replayed, host walk %.1f us, GPU %.1f us, "
                   "period %.1f us (%lld periods): the GPU idle %.1f us a step\n",
                   key.empty() ? "(no key)" : key.c_str(), static_cast<long long>(s.steps),
                   s.walk_us / n, s.gpu_us / n,
                   s.periods ? s.period_us / static_cast<double>(s.periods) : 0.0,
                   static_cast<long long>(s.periods),
                   s.periods ? s.period_us / static_cast<double>(s.periods) - s.gpu_us / n : 0.0);
    }
    if (start_) cuda::event_destroy(start_);
    if (end_) cuda::event_destroy(end_);
  }
  // A replayed step begins (its ops are about to be walked and checked against the recording).
  void begin(const std::string& key) {
    const auto now = Clock::now();
    Stats& s = keys_[key];
    if (chain_ == &s) {  // consecutive replays of one key: one period
      s.period_us += us(began_, now);
      ++s.periods;
    }
    chain_ = step_ = &s;
    began_ = now;
    launched_ = false;
  }
  // Around the graph launch; only a step that began as a replay is timed (a step that recorded
  // its graph launches it too).
  void before_launch() {
    if (!step_) return;
    if (!start_) start_ = cuda::event_create(), end_ = cuda::event_create();
    walk_us_ = us(began_, Clock::now());
    cuda::event_record(start_);
  }
  void after_launch() {
    if (!step_) return;
    cuda::event_record(end_);
    launched_ = true;
  }
  // The step ended; a replay that launched adds its walk and GPU time.
  void end() {
    if (step_ && launched_) {
      step_->walk_us += walk_us_;
      step_->gpu_us += 1000.0 * cuda::event_elapsed_ms(start_, end_);
      ++step_->steps;
    }
    step_ = nullptr;
  }
  // A step that is not a replay: not timed, and it breaks the chain of periods.
  void other_step() { chain_ = step_ = nullptr; }

 private:
  using Clock = std::chrono::steady_clock;
  static double us(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
  }
  struct Stats {
    int64_t steps = 0, periods = 0;
    double walk_us = 0, gpu_us = 0, period_us = 0;
  };
  std::map<std::string, Stats> keys_;
  Stats* chain_ = nullptr;  // the key of the last step, while steps are replays of it
  Stats* step_ = nullptr;   // the replay being timed, between begin() and end()
  Clock::time_point began_{};
  double walk_us_ = 0;
  bool launched_ = false;
  void* start_ = nullptr;
  void* end_ = nullptr;
};

}  // namespace lockstep::kernels
