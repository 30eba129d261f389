#include "scheduler/stream_waker.h"

namespace lockstep {

StreamWaker::StreamWaker() : thread_([this] { loop(); }) {}

StreamWaker::~StreamWaker() {
  flush();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void StreamWaker::add(const void* key, std::function<void()> wake) {
  if (!wake || (!added_.empty() && added_.back().first == key)) return;
  added_.emplace_back(key, std::move(wake));
}

void StreamWaker::flush() {
  if (added_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (handed_.empty()) {
      handed_.swap(added_);
    } else {  // the thread has not taken the last batch yet: this one joins it, in order
      for (auto& w : added_) handed_.push_back(std::move(w));
      added_.clear();
    }
  }
  cv_.notify_one();
}

void StreamWaker::loop() {
  std::vector<std::pair<const void*, std::function<void()>>> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !handed_.empty(); });
      if (handed_.empty()) return;  // stopping, and nothing left to run
      batch.swap(handed_);
    }
    for (auto& [key, wake] : batch) wake();
    batch.clear();  // keeps its capacity for the next swap
  }
}

}  // namespace lockstep
