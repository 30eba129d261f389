#include "server/http_server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "server/http_limits.h"
#include "server/http_session.h"
#include "server/routes.h"

namespace lockstep::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// I/O threads only move bytes and format chunks; two keep one slow handler step from stalling the
// rest. Workers run the routes (JSON, templates, tokenizing).
constexpr int kIoThreads = 2;

}  // namespace

struct HttpServer::Impl : SessionHost {
  Impl(const ServingContext& ctx, size_t workers)
      : ctx(ctx), routes_(ctx, stats_, draining_), workers_(workers), acceptor(net::make_strand(io)),
        retry_accept(acceptor.get_executor()) {}

  const Routes& routes() const override { return routes_; }
  HttpStats& stats() override { return stats_; }
  net::thread_pool& workers() override { return workers_; }
  bool draining() const override { return draining_; }
  void responding(bool started) override {
    std::lock_guard<std::mutex> lock(mu);
    started ? ++in_flight : --in_flight;
    if (in_flight == 0) idle.notify_all();
  }
  void session_closed(HttpSession* s) override {
    std::lock_guard<std::mutex> lock(mu);
    sessions.erase(s);
  }

  void accept() {
    acceptor.async_accept(net::make_strand(io), [this](boost::system::error_code ec, tcp::socket socket) {
      if (!acceptor.is_open()) return;
      if (ec) {  // out of file descriptors, most likely: try again shortly rather than spin
        retry_accept.expires_after(std::chrono::milliseconds(50));
        retry_accept.async_wait([this](boost::system::error_code e) {
          if (!e) accept();
        });
        return;
      }
      socket.set_option(tcp::no_delay(true));  // small SSE chunks go out at once
      std::shared_ptr<HttpSession> session;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (sessions.size() < kMaxConnections) {
          session = std::make_shared<HttpSession>(std::move(socket), *this);
          sessions.emplace(session.get(), session);
        }
      }
      if (session) session->start();  // else the socket closes here
      accept();
    });
  }

  const ServingContext& ctx;
  HttpStats stats_;
  std::atomic<bool> draining_{false};
  Routes routes_;
  net::thread_pool workers_;
  net::io_context io;
  tcp::acceptor acceptor;
  net::steady_timer retry_accept;
  std::vector<std::thread> io_threads;
  std::mutex mu;
  std::condition_variable idle;
  std::unordered_map<HttpSession*, std::weak_ptr<HttpSession>> sessions;
  size_t in_flight = 0;  // sessions between a request's body and its reply's last byte
  std::atomic<bool> stopped{false};
};

HttpServer::HttpServer(ServingContext ctx) : ctx_(std::move(ctx)) {
  const size_t workers = ctx_.config.http_threads > 0 ? static_cast<size_t>(ctx_.config.http_threads) : 4;
  impl_ = std::make_unique<Impl>(ctx_, workers);
}

HttpServer::~HttpServer() {
  impl_->io.stop();
  for (auto& t : impl_->io_threads)
    if (t.joinable()) t.join();
  impl_->workers_.join();
}

int HttpServer::bind() {
  const auto& c = ctx_.config;
  boost::system::error_code ec;
  tcp::resolver resolver(impl_->io);
  const auto endpoints = resolver.resolve(c.host, std::to_string(c.port), ec);
  if (ec || endpoints.empty()) fail("cannot listen on ", c.host, ": ", ec ? ec.message() : "no address");
  const tcp::endpoint ep = endpoints.begin()->endpoint();
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(1024, ec);  // 64 clients connecting at once must not see dropped SYNs
  if (ec) fail("cannot listen on ", c.host, ":", c.port, " (", ec.message(), ")");
  return a.local_endpoint().port();
}

void HttpServer::serve() {
  impl_->accept();
  for (int i = 1; i < kIoThreads; ++i) impl_->io_threads.emplace_back([this] { impl_->io.run(); });
  impl_->io.run();  // returns when drain_and_stop() stops the context
  for (auto& t : impl_->io_threads) t.join();
  impl_->io_threads.clear();
  // Let drain_and_stop() return before the owner may destroy this object.
  while (!impl_->stopped) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::drain_and_stop() {
  Impl& s = *impl_;
  s.draining_ = true;
  net::post(s.acceptor.get_executor(), [&s] {
    boost::system::error_code ignored;
    s.acceptor.close(ignored);
    s.retry_accept.cancel();
  });
  {  // idle and half-received connections close now; the rest after their reply
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto& [ptr, weak] : s.sessions)
      if (auto session = weak.lock()) session->shut_down();
  }
  ctx_.engine->drain();  // submit now throws ShuttingDown (503); returns when all have finished
  // The engine has emitted every final event; let the sessions write them.
  {
    std::unique_lock<std::mutex> lock(s.mu);
    s.idle.wait_for(lock, kDrainWriteTimeout, [&s] { return s.in_flight == 0; });
  }
  s.io.stop();
  s.stopped = true;
}

}  // namespace lockstep::server
