// The queue's bookkeeping on its own (no model): a request holds its place from push to its Finish
// event, groups are all or none, and an asynchronous reader is woken for every event, including
// events emitted before it registered.
#include <gtest/gtest.h>

#include "scheduler/request_queue.h"

namespace lockstep {
namespace {

StreamEvent finish_event() {
  StreamEvent e;
  e.kind = StreamEvent::Kind::Finish;
  e.finish_reason = "stop";
  return e;
}

TEST(RequestQueue, APlaceIsHeldUntilTheFinishEvent) {
  RequestQueue q(2);
  auto a = q.push(std::vector<EngineRequest>(1));
  EXPECT_THROW(q.push(std::vector<EngineRequest>(2)), QueueFull) << "a group of 2 with 1 place left";
  auto b = q.push(std::vector<EngineRequest>(1));
  EXPECT_THROW(q.push(std::vector<EngineRequest>(1)), QueueFull);
  auto taken = q.pop(8, false, std::chrono::milliseconds(0));
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_THROW(q.push(std::vector<EngineRequest>(1)), QueueFull) << "taken is not finished";
  q.emit(*taken[0].stream, StreamEvent{});  // a token: still held
  EXPECT_THROW(q.push(std::vector<EngineRequest>(1)), QueueFull);
  q.emit(*taken[0].stream, finish_event());
  q.emit(*taken[0].stream, finish_event());  // a second Finish gives nothing back twice
  EXPECT_NO_THROW(q.push(std::vector<EngineRequest>(1)));
  EXPECT_THROW(q.push(std::vector<EngineRequest>(1)), QueueFull);
  EXPECT_EQ(q.metrics().requests_rejected, 5u);
  EXPECT_EQ(q.metrics().requests_total, 3u);
}

TEST(RequestQueue, AsynchronousReadersAreWokenForEveryEvent) {
  RequestQueue q(4);
  auto streams = q.push(std::vector<EngineRequest>(1));
  auto taken = q.pop(1, false, std::chrono::milliseconds(0));
  q.emit(*taken[0].stream, StreamEvent{});  // before anyone listens
  int wakes = 0;
  streams[0]->on_event([&] { ++wakes; });
  EXPECT_EQ(wakes, 1) << "an event already waiting wakes the reader at once";
  q.emit(*taken[0].stream, StreamEvent{});
  q.emit(*taken[0].stream, finish_event());
  EXPECT_EQ(wakes, 3);
  StreamEvent e;
  int events = 0;
  while (streams[0]->next(e, std::chrono::milliseconds(0))) ++events;
  EXPECT_EQ(events, 3);
  EXPECT_EQ(e.kind, StreamEvent::Kind::Finish);
}

}  // namespace
}  // namespace lockstep
