// Every limit the HTTP layer puts on a client, in one place (docs/server.md lists each with the
// answer a client gets past it).
#pragma once

#include <chrono>
#include <cstddef>

namespace lockstep::server {

constexpr size_t kMaxHeadBytes = 16u << 10;    // request line and header fields together
constexpr size_t kMaxHeaderFields = 100;
constexpr size_t kMaxBodyBytes = 64u << 20;    // however the body is framed (Content-Length, chunked)
constexpr size_t kMaxConnections = 4096;       // open at once; more are closed on accept

// An idle keep-alive connection is closed after this (it costs a socket, never a thread).
constexpr std::chrono::seconds kIdleTimeout{30};
// From a request's first byte to the end of its head, and from there to the end of its body.
constexpr std::chrono::seconds kHeadTimeout{10};
constexpr std::chrono::seconds kBodyTimeout{60};
// A client that reads nothing of a response for this long is dropped (and its request cancelled).
constexpr std::chrono::seconds kWriteTimeout{60};
// SIGTERM: how long finished responses may take to reach slow clients before the process exits.
constexpr std::chrono::seconds kDrainWriteTimeout{10};

}  // namespace lockstep::server
