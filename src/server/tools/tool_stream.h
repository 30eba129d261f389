// The tool-call view of a streamed chat answer: content deltas with call markup held back, and
// each call once its segment is decided. Every push rescans the text so far with the same parser
// the whole response uses, so the deltas concatenate to exactly parse_tool_output(final text).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/tools/tool_call.h"

namespace lockstep::server::tools {

class ToolCallStream {
 public:
  ToolCallStream(std::shared_ptr<const ToolCallParser> parser, bool parallel);

  struct Delta {
    std::string content;          // new content text
    std::vector<ToolCall> calls;  // calls decided since the last delta, in order
  };
  // The next piece of the answer's content (after any reasoning split).
  Delta push(std::string_view text);
  // At the end of the answer: everything not sent yet.
  Delta finish();

  size_t calls_sent() const { return calls_sent_; }

 private:
  Delta advance(bool final);

  std::shared_ptr<const ToolCallParser> parser_;
  bool parallel_;
  std::string text_;
  std::string content_sent_;
  size_t calls_sent_ = 0;
};

}  // namespace lockstep::server::tools
