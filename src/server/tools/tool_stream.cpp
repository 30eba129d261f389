#include "server/tools/tool_stream.h"

namespace lockstep::server::tools {

ToolCallStream::ToolCallStream(std::shared_ptr<const ToolCallParser> parser, bool parallel)
    : parser_(std::move(parser)), parallel_(parallel) {}

ToolCallStream::Delta ToolCallStream::push(std::string_view text) {
  text_ += text;
  return text.empty() ? Delta{} : advance(false);
}

ToolCallStream::Delta ToolCallStream::finish() { return advance(true); }

ToolCallStream::Delta ToolCallStream::advance(bool final) {
  ToolOutput now = assemble_tool_output(parser_->scan(text_, final), parallel_);
  if (!final) {
    // Trailing whitespace is dropped if a call follows it: it waits for what comes next.
    const size_t e = now.content.find_last_not_of(" \t\r\n");
    now.content.resize(e == std::string::npos ? 0 : e + 1);
  }
  Delta d;
  // The decided prefix only grows (ToolCallParser::scan); the guard keeps a parser bug from
  // sending text twice.
  if (now.content.size() > content_sent_.size() && now.content.compare(0, content_sent_.size(), content_sent_) == 0) {
    d.content = now.content.substr(content_sent_.size());
    content_sent_ = now.content;
  }
  for (size_t i = calls_sent_; i < now.calls.size(); ++i) d.calls.push_back(now.calls[i]);
  if (now.calls.size() > calls_sent_) calls_sent_ = now.calls.size();
  return d;
}

}  // namespace lockstep::server::tools
