// Counters kept by the HTTP layer itself (the engine keeps its own, EngineMetrics). Atomics, so
// handler threads update them without a lock.
#pragma once

#include <atomic>
#include <cstdint>

namespace lockstep::server {

struct HttpStats {
  std::atomic<uint64_t> completions{0}, chat_completions{0};  // accepted generation requests
  std::atomic<uint64_t> status_2xx{0}, status_4xx{0}, status_5xx{0};
  std::atomic<uint64_t> disconnects{0};   // replies whose client went away before the end
  std::atomic<int64_t> open_streams{0};   // SSE responses still being written
  // Time spent polling streams into SSE bytes on the I/O threads (HttpSession::pump), and how
  // often: what serving a stream costs the HTTP side beyond the engine.
  std::atomic<uint64_t> stream_poll_ns{0}, stream_polls{0};
};

}  // namespace lockstep::server
