// Runs request streams' wake callbacks (RequestStream::on_event) on a thread of its own, so the
// engine thread only pushes events. A wake schedules the stream's reader (the HTTP session posts
// its pump to its I/O thread), which costs microseconds per stream: done inline, the wakes were
// about three quarters of the engine's consume phase at 128 sequences, time in which the next
// forward cannot start. Handed over once a step, they run while that forward does.
//
// Waking later changes nothing a reader sees: the events are in the stream before its wake is
// queued, and a reader drains whatever is there when it runs. Blocking readers
// (RequestStream::next) are woken inline by the stream's condition variable, as before.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace lockstep {

class StreamWaker {
 public:
  StreamWaker();
  // Runs what it was handed, then stops.
  ~StreamWaker();
  StreamWaker(const StreamWaker&) = delete;
  StreamWaker& operator=(const StreamWaker&) = delete;

  // Engine thread: `wake` of the stream `key` is to run at the next flush. A stream's events of
  // one step come one after another, so a wake for the same stream as the last one is dropped.
  void add(const void* key, std::function<void()> wake);
  // Engine thread: hands the wakes added since the last flush to the waker's thread.
  void flush();

 private:
  void loop();

  std::vector<std::pair<const void*, std::function<void()>>> added_;  // engine thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<const void*, std::function<void()>>> handed_;  // under mu_
  bool stop_ = false;                                                  // under mu_
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace lockstep
