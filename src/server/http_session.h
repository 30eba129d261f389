// One TCP connection of the server, on Boost.Beast/Asio: reads each request under the limits of
// http_limits.h (head size, field count, body size however framed, time for head and body),
// hands it to the routes on the worker pool, and writes the reply. A reply that waits for the
// engine holds no thread: engine events wake the session, which polls the reply on its strand;
// meanwhile a read stays posted on the socket, so a client that leaves (streaming or not) is
// noticed at once and its sequences are cancelled.
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <memory>
#include <optional>
#include <string>

#include "server/http_message.h"
#include "server/http_stats.h"
#include "server/routes.h"

namespace lockstep::server {

class HttpSession;

// What sessions share: the server (http_server.cpp) provides it.
class SessionHost {
 public:
  virtual ~SessionHost() = default;
  virtual const Routes& routes() const = 0;
  virtual HttpStats& stats() = 0;
  virtual boost::asio::thread_pool& workers() = 0;
  virtual bool draining() const = 0;
  // A session between reading a request's body and writing its reply's last byte.
  virtual void responding(bool started) = 0;
  virtual void session_closed(HttpSession* session) = 0;
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, SessionHost& host);
  void start();
  // SIGTERM: a connection that is idle or still sending its request is closed now; one with a
  // reply in progress is closed once the reply is written. Thread-safe.
  void shut_down();

 private:
  enum class State { Idle, Head, Body, Handling, Responding, Lingering, Closed };

  void wait_for_request();
  void read_head();
  void on_head(boost::beast::error_code ec);
  void read_body();
  void on_body(boost::beast::error_code ec);
  void on_reply(Reply reply);
  void pump();
  void flush();
  void on_written(boost::beast::error_code ec);
  void watch_for_disconnect();
  void end_response();
  void next_request();
  void linger_close();
  void discard_more();
  // Answers a request that could not be read (its framing is unknown) and closes.
  void refuse(int status, const std::string& message, const std::string& code);
  void client_gone();
  void close();

  boost::beast::tcp_stream stream_;
  boost::asio::steady_timer write_timer_;
  SessionHost& host_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  State state_ = State::Idle;
  HttpRequest request_;
  bool keep_alive_ = true;
  bool shutting_down_ = false;         // SIGTERM: no further request on this connection
  std::shared_ptr<PendingResponse> pending_;
  HttpResponse head_;                  // of the reply being written
  bool head_sent_ = false;             // streaming: status line and headers are out
  bool reply_complete_ = false;        // the last byte is in out_ or being written
  std::string out_, sending_;          // bytes to write; bytes being written
  bool writing_ = false, watching_ = false;
  std::atomic<bool> wake_posted_{false};
};

}  // namespace lockstep::server
