// Server-sent events, read incrementally: bytes arrive in pieces that split lines and events
// anywhere, and each completed event's data comes out as soon as its blank line has arrived (so a
// client can time it). Only what an OpenAI-style stream uses is kept: `data:` lines (several are
// joined with "\n", as the SSE specification says); comments and the `event:`, `id:`, `retry:`
// fields are skipped. Lines end with "\n" or "\r\n" (a lone "\r" ends no line).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lockstep::client {

class SseReader {
 public:
  // Appends `bytes`; returns the data of every event they complete, in order.
  std::vector<std::string> feed(std::string_view bytes);

 private:
  std::string line_;   // the unfinished line
  std::string data_;   // the current event's data so far
  bool has_data_ = false;
};

}  // namespace lockstep::client
