// The server process's HTTP side on Boost.Beast/Asio: an acceptor and a few I/O threads serve
// every connection asynchronously (idle keep-alive connections, slow clients and open streams
// cost a socket, not a thread), a small worker pool parses and tokenizes requests, and SIGTERM
// stops it gracefully.
#pragma once

#include <atomic>
#include <memory>

#include "server/http_stats.h"
#include "server/serving_context.h"

namespace lockstep::server {

class HttpServer {
 public:
  explicit HttpServer(ServingContext ctx);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds config.host:config.port (port 0: any free port); returns the port. Throws
  // lockstep::Error when the address cannot be bound.
  int bind();
  // Serves until drain_and_stop() has finished.
  void serve();
  // Graceful stop (any thread): /health turns 503, the listener closes, idle and half-received
  // connections close at once, new generation requests get 503, everything admitted or queued
  // runs to its end (Engine::drain) and its reply is written (at most kDrainWriteTimeout more),
  // then serve() returns.
  void drain_and_stop();

  const ServingContext& context() const { return ctx_; }

 private:
  struct Impl;
  ServingContext ctx_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::server
