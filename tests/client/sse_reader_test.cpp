// Server-sent events split anywhere by the network still come out whole, in order, as soon as
// their blank line arrives.
#include <gtest/gtest.h>

#include "client/sse_reader.h"

namespace lockstep::client {
namespace {

TEST(SseReader, EventsSplitAtEveryByteComeOutWhole) {
  const std::string stream = "data: {\"a\":1}\n\ndata: [DONE]\n\n";
  SseReader r;
  std::vector<std::string> events;
  for (char c : stream)
    for (auto& e : r.feed(std::string_view(&c, 1))) events.push_back(e);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], "{\"a\":1}");
  EXPECT_EQ(events[1], "[DONE]");
}

TEST(SseReader, AnEventIsDeliveredOnlyWhenItsBlankLineArrives) {
  SseReader r;
  EXPECT_TRUE(r.feed("data: x\n").empty());
  EXPECT_EQ(r.feed("\n"), std::vector<std::string>{"x"});
}

TEST(SseReader, CrLfCommentsOtherFieldsAndMultiLineData) {
  SseReader r;
  const auto events = r.feed(
      ": a comment\r\nevent: response.created\r\nid: 7\r\ndata: one\r\ndata:two\r\n\r\n"
      "event: ping\n\n"  // an event without data is no event
      "data: {\"x\": \"a b\"}\n\n");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], "one\ntwo");
  EXPECT_EQ(events[1], "{\"x\": \"a b\"}");
}

TEST(SseReader, SeveralEventsInOnePiece) {
  SseReader r;
  const auto events = r.feed("data: 1\n\ndata: 2\n\ndata: 3");
  EXPECT_EQ(events, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(r.feed("\n\n"), std::vector<std::string>{"3"});
}

}  // namespace
}  // namespace lockstep::client
