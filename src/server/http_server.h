// The server process's HTTP side: a cpp-httplib server with the routes, a thread per open
// connection (streams hold theirs until the last token), and the graceful stop SIGTERM asks for.
#pragma once

#include <atomic>
#include <memory>

#include "server/http_stats.h"
#include "server/serving_context.h"

namespace lockstep::server {

class Listener;

class HttpServer {
 public:
  explicit HttpServer(ServingContext ctx);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds config.host:config.port (port 0: any free port); returns the port. Throws
  // lockstep::Error when the address cannot be bound.
  int bind();
  // Serves until drain_and_stop() closes the listener.
  void serve();
  // Graceful stop: /health turns 503, new generation requests get 503, everything admitted or
  // queued runs to its end (Engine::drain), open streams finish writing, then the listener
  // closes and serve() returns.
  void drain_and_stop();

  const ServingContext& context() const { return ctx_; }

 private:
  ServingContext ctx_;
  HttpStats stats_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> stopped_{false};  // drain_and_stop() is past its last use of http_
  std::unique_ptr<Listener> http_;
};

}  // namespace lockstep::server
