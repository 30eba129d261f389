// The engine's waker: wakes added on one thread run on the waker's own thread after a flush, in
// the order added, one per run of the same stream; the destructor runs what it still holds; and
// a queue with a waker pushes events at once but wakes their readers only at the flush.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "scheduler/request_queue.h"
#include "scheduler/stream_waker.h"

namespace lockstep {
namespace {

// Waits up to 10 s for pred.
template <typename Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 2000 && !pred(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return pred();
}

TEST(StreamWaker, RunsFlushedWakesInOrderOnItsOwnThreadOncePerRun) {
  std::mutex mu;
  std::vector<int> ran;
  std::vector<std::thread::id> threads;
  auto wake = [&](int v) {
    return [&, v] {
      std::lock_guard<std::mutex> lock(mu);
      ran.push_back(v);
      threads.push_back(std::this_thread::get_id());
    };
  };
  StreamWaker w;
  int a = 0, b = 0;
  w.add(&a, wake(1));
  w.add(&a, wake(2));  // the same stream again: dropped
  w.add(&b, wake(3));
  w.add(&a, wake(4));  // a again after b: a new run
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(ran.empty()) << "a wake ran before the flush";
  }
  w.flush();
  ASSERT_TRUE(eventually([&] { std::lock_guard<std::mutex> l(mu); return ran.size() == 3; }));
  w.add(&b, wake(5));
  w.flush();
  ASSERT_TRUE(eventually([&] { std::lock_guard<std::mutex> l(mu); return ran.size() == 4; }));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(ran, (std::vector<int>{1, 3, 4, 5}));
  for (const auto& id : threads) EXPECT_NE(id, std::this_thread::get_id());
}

TEST(StreamWaker, DestructorRunsWhatItHolds) {
  std::atomic<int> ran{0};
  int keys[3];
  {
    StreamWaker w;
    for (int& k : keys) w.add(&k, [&] { ++ran; });  // added, never flushed
  }
  EXPECT_EQ(ran.load(), 3);
}

TEST(StreamWaker, QueueWithAWakerPushesAtOnceAndWakesAtTheFlush) {
  RequestQueue q(4);
  EngineRequest r;
  r.prompt = {1, 2, 3};
  auto stream = q.push({r}).front();
  std::atomic<int> wakes{0};
  stream->on_event([&] { ++wakes; });
  StreamWaker w;
  q.set_waker(&w);
  StreamEvent e;
  e.token = 7;
  q.emit(*stream, e);
  e.token = 8;
  q.emit(*stream, e);
  StreamEvent got;
  ASSERT_TRUE(stream->next(got, std::chrono::milliseconds(0))) << "the event was not pushed at once";
  EXPECT_EQ(got.token, 7);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(wakes.load(), 0) << "woken before the flush";
  w.flush();
  EXPECT_TRUE(eventually([&] { return wakes.load() == 1; })) << "two events of one stream: one wake";
  q.set_waker(nullptr);
  e.token = 9;
  q.emit(*stream, e);
  EXPECT_EQ(wakes.load(), 2) << "without a waker the wake runs inline";
}

}  // namespace
}  // namespace lockstep
