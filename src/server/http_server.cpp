#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "server/request_framing.h"
#include "server/routes.h"

namespace lockstep::server {

// httplib listens with a backlog of 5 (compiled into Debian's library); 64 clients connecting
// at once would then see dropped SYNs and one-second retransmits. Linux lets listen() be called
// again on a listening socket to change the backlog, which needs the protected socket.
class Listener : public httplib::Server {
 public:
  void widen_backlog(int backlog) { ::listen(svr_sock_, backlog); }
};

HttpServer::HttpServer(ServingContext ctx) : ctx_(std::move(ctx)), http_(std::make_unique<Listener>()) {
  const EngineOptions& eo = ctx_.engine->options();
  // Every running or queued request may hold a connection thread (a stream holds it to the end),
  // plus spares so that a full queue is answered with 503 rather than left waiting for a thread.
  size_t threads = static_cast<size_t>(ctx_.config.http_threads);
  if (threads == 0) threads = std::max<size_t>(32, static_cast<size_t>(eo.parallel) + eo.max_queue + 16);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_keep_alive_max_count(10000);  // the default 5 makes clients reconnect constantly
  http_->set_keep_alive_timeout(30);
  http_->set_read_timeout(60);
  http_->set_write_timeout(60);
  http_->set_payload_max_length(kMaxBodyBytes);
  http_->set_tcp_nodelay(true);  // small SSE chunks go out at once
  register_routes(*http_, ctx_, stats_, draining_);
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const auto& c = ctx_.config;
  int port = c.port;
  if (port == 0) {
    port = http_->bind_to_any_port(c.host);
    if (port < 0) fail("cannot listen on ", c.host, " (any port)");
  } else if (!http_->bind_to_port(c.host, port)) {
    fail("cannot listen on ", c.host, ":", port, " (in use, or not an address of this machine)");
  }
  http_->widen_backlog(1024);
  return port;
}

void HttpServer::serve() {
  http_->listen_after_bind();
  // The listener closes inside drain_and_stop(); let that call return before the owner may
  // destroy this object.
  while (draining_ && !stopped_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

void HttpServer::drain_and_stop() {
  draining_ = true;
  ctx_.engine->drain();  // submit now throws ShuttingDown (503); returns when all have finished
  // The engine has emitted every final event; wait for the connection threads to write them.
  for (int i = 0; i < 3000 && stats_.open_streams.load() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  http_->stop();
  stopped_ = true;
}

}  // namespace lockstep::server
