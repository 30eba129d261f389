#include "server/http_session.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <cctype>
#include <chrono>

#include "server/api_error.h"
#include "server/http_limits.h"

namespace lockstep::server {

namespace net = boost::asio;
namespace http = boost::beast::http;
using boost::beast::error_code;

namespace {

constexpr size_t kReadChunk = 4096;
constexpr size_t kKeptBufferBytes = 64u << 10;
constexpr std::chrono::seconds kLingerTime{2};

// "/v1/models/org%2Fname?x=1" -> "/v1/models/org/name".
std::string decoded_path(std::string_view target) {
  target = target.substr(0, target.find('?'));
  std::string out;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == '%' && i + 2 < target.size() && std::isxdigit(static_cast<unsigned char>(target[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(target[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(target.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += target[i];
    }
  }
  return out;
}

std::string status_line(int status) {
  const auto reason = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
}

// Status line and headers; `length` < 0 means a chunked body follows.
std::string serialize_head(const HttpResponse& r, int64_t length, bool keep_alive) {
  std::string s = status_line(r.status);
  s += "Content-Type: " + r.content_type + "\r\n";
  for (const auto& [name, value] : r.headers) s += name + ": " + value + "\r\n";
  s += length < 0 ? std::string("Transfer-Encoding: chunked\r\n")
                  : "Content-Length: " + std::to_string(length) + "\r\n";
  s += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return s;
}

std::string chunk(const std::string& data) {
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

void count_status(HttpStats& stats, int status) {
  if (status >= 500) ++stats.status_5xx;
  else if (status >= 400) ++stats.status_4xx;
  else ++stats.status_2xx;
}

}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket socket, SessionHost& host)
    : stream_(std::move(socket)), write_timer_(stream_.get_executor()), host_(host) {}

void HttpSession::start() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->wait_for_request(); });
}

void HttpSession::shut_down() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    self->shutting_down_ = true;
    const State s = self->state_;
    if (s == State::Idle || s == State::Head || s == State::Body || s == State::Lingering) self->close();
  });
}

// Between requests: an idle connection costs a socket and a buffer, and is closed after
// kIdleTimeout; the head timer starts with the request's first byte.
void HttpSession::wait_for_request() {
  state_ = State::Idle;
  if (shutting_down_ || host_.draining()) return close();
  // The buffer grew to hold the last body; an idle connection must not keep megabytes.
  if (buffer_.capacity() > kKeptBufferBytes) buffer_.shrink_to_fit();
  if (buffer_.size() > 0) return read_head();  // a pipelined request is already here
  stream_.expires_after(kIdleTimeout);
  stream_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](error_code ec, size_t n) {
    self->buffer_.commit(n);
    if (ec || self->state_ == State::Closed) return self->close();
    self->read_head();
  });
}

void HttpSession::read_head() {
  state_ = State::Head;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(kMaxHeadBytes));
  parser_->body_limit(kMaxBodyBytes);  // counts chunked bodies too
  stream_.expires_after(kHeadTimeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](error_code ec, size_t) { self->on_head(ec); });
}

void HttpSession::on_head(error_code ec) {
  if (state_ == State::Closed) return;
  if (ec == http::error::header_limit)
    return refuse(431, "the request head is over " + std::to_string(kMaxHeadBytes >> 10) + " KiB",
                  "headers_too_large");
  if (ec == http::error::body_limit)  // a Content-Length over the limit, known from the head
    return refuse(413, "request body too large: at most " + std::to_string(kMaxBodyBytes >> 20) + " MiB", "");
  if (ec == http::error::bad_content_length || ec == http::error::multiple_content_length ||
      ec == http::error::bad_transfer_encoding)
    return refuse(400, "malformed request framing: " + ec.message(), "invalid_framing");
  if (ec == http::error::end_of_stream || ec == boost::beast::error::timeout || ec == net::error::eof ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset)
    return close();
  if (ec) return refuse(400, "malformed HTTP request: " + ec.message(), "invalid_request");

  const auto& h = parser_->get();
  size_t fields = 0, lengths = 0;
  request_ = HttpRequest{};
  for (const auto& f : h) {
    ++fields;
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == "content-length") ++lengths;
    request_.headers[name] = std::string(f.value());
  }
  if (fields > kMaxHeaderFields)
    return refuse(431, "too many header fields (" + std::to_string(fields) + "; at most " +
                           std::to_string(kMaxHeaderFields) + ")", "headers_too_large");
  // Beast accepts a repeated Content-Length with equal values; two framings of one body are
  // how requests are smuggled past proxies, so neither is accepted.
  if (lengths > 1 || request_.header("content-length").find(',') != std::string::npos)
    return refuse(400, "malformed request framing: Content-Length given more than once", "invalid_framing");
  request_.method = std::string(h.method_string());
  request_.path = decoded_path(h.target());
  keep_alive_ = h.keep_alive();
  if (auto early = host_.routes().check_head(request_)) {
    // 401/404/405 from the head alone; an unread body cannot be skipped safely, so close then.
    if (!parser_->is_done()) keep_alive_ = false;
    host_.responding(true);
    state_ = State::Responding;
    return on_reply(Reply{std::move(*early), nullptr});
  }
  if (request_.header("expect") == "100-continue" && !parser_->is_done()) {
    out_ = "HTTP/1.1 100 Continue\r\n\r\n";
    sending_ = std::move(out_);
    out_.clear();
    net::async_write(stream_, net::buffer(sending_), [self = shared_from_this()](error_code e, size_t) {
      if (e) return self->close();
      self->read_body();
    });
    return;
  }
  read_body();
}

void HttpSession::read_body() {
  state_ = State::Body;
  stream_.expires_after(kBodyTimeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](error_code ec, size_t) { self->on_body(ec); });
}

void HttpSession::on_body(error_code ec) {
  if (state_ == State::Closed) return;
  if (ec == http::error::body_limit)
    return refuse(413, "request body too large: at most " + std::to_string(kMaxBodyBytes >> 20) + " MiB", "");
  if (ec == boost::beast::error::timeout) return close();
  if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == net::error::eof ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset)
    return close();
  if (ec) return refuse(400, "malformed request body framing: " + ec.message(), "invalid_framing");
  request_.body = std::move(parser_->get().body());
  parser_.reset();
  stream_.expires_never();
  state_ = State::Handling;
  host_.responding(true);
  // Parsing, template rendering and tokenizing are CPU work: off the I/O threads.
  net::post(host_.workers(), [self = shared_from_this()] {
    Reply reply = self->host_.routes().handle(self->request_);
    net::post(self->stream_.get_executor(),
              [self, reply = std::move(reply)]() mutable { self->on_reply(std::move(reply)); });
  });
}

void HttpSession::on_reply(Reply reply) {
  if (state_ == State::Closed) {
    if (reply.pending) reply.pending->abandon();
    return;
  }
  state_ = State::Responding;
  std::string().swap(request_.body);  // up to 64 MiB, not kept for the life of the connection
  stream_.expires_never();  // the head/body deadlines are over; writes have their own timer
  head_ = std::move(reply.response);
  head_sent_ = reply_complete_ = false;
  if (request_.method == "HEAD") reply.pending.reset();
  if (!reply.pending) {
    count_status(host_.stats(), head_.status);
    out_ += serialize_head(head_, static_cast<int64_t>(head_.body.size()), keep_alive_ && !shutting_down_);
    if (request_.method != "HEAD") out_ += head_.body;
    reply_complete_ = true;
    return flush();
  }
  pending_ = std::move(reply.pending);
  std::weak_ptr<HttpSession> weak = shared_from_this();
  pending_->set_wake([weak] {  // on the engine's waker thread (stream_waker.h): only schedule
    auto self = weak.lock();
    if (self && !self->wake_posted_.exchange(true))
      net::post(self->stream_.get_executor(), [self] { self->pump(); });
  });
  watch_for_disconnect();
  pump();
}

// Turns what the pending reply has ready into bytes to write.
void HttpSession::pump() {
  wake_posted_ = false;
  if (!pending_ || state_ != State::Responding) return;
  std::string body;
  HttpResponse head = head_;
  const auto t0 = std::chrono::steady_clock::now();
  const bool done = pending_->poll(body, head);
  if (pending_->streaming()) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
    host_.stats().stream_poll_ns += static_cast<uint64_t>(ns.count());
    ++host_.stats().stream_polls;
    if (!head_sent_) {
      count_status(host_.stats(), head_.status);
      out_ += serialize_head(head_, -1, keep_alive_ && !shutting_down_);
      head_sent_ = true;
    }
    if (!body.empty()) out_ += chunk(body);
    if (done) out_ += "0\r\n\r\n";
  } else if (done) {
    count_status(host_.stats(), head.status);
    head_ = head;
    out_ += serialize_head(head, static_cast<int64_t>(body.size()), keep_alive_ && !shutting_down_);
    out_ += body;
  }
  if (done) {
    pending_.reset();
    reply_complete_ = true;
  }
  flush();
}

void HttpSession::flush() {
  if (writing_ || out_.empty()) return;
  writing_ = true;
  sending_ = std::move(out_);
  out_.clear();
  // A client that stops reading must not hold its sequences forever.
  write_timer_.expires_after(kWriteTimeout);
  write_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->client_gone();
  });
  net::async_write(stream_, net::buffer(sending_),
                   [self = shared_from_this()](error_code ec, size_t) { self->on_written(ec); });
}

void HttpSession::on_written(error_code ec) {
  writing_ = false;
  write_timer_.cancel();
  if (state_ == State::Closed) return;
  if (ec) return client_gone();
  if (!out_.empty()) return flush();
  if (reply_complete_) end_response();
}

// While a reply waits for the engine the client sends nothing (or its next request, pipelined):
// a read that ends in EOF or an error means it has left.
void HttpSession::watch_for_disconnect() {
  if (watching_) return;
  watching_ = true;
  auto on_read = [self = shared_from_this()](error_code ec, size_t n) {
    self->watching_ = false;
    self->buffer_.commit(n);
    if (self->state_ == State::Closed) return;
    if (self->state_ == State::Idle) return self->next_request();  // the reply ended meanwhile
    if (ec) return self->client_gone();
    // Bytes of a pipelined request: kept in buffer_ for after this reply.
  };
  stream_.socket().async_read_some(buffer_.prepare(kReadChunk), std::move(on_read));
}

void HttpSession::end_response() {
  host_.responding(false);
  state_ = State::Idle;
  if (watching_) {
    error_code ignored;
    stream_.socket().cancel(ignored);  // the read's handler continues with next_request
    return;
  }
  next_request();
}

void HttpSession::next_request() {
  if (!keep_alive_ || shutting_down_ || host_.draining()) return linger_close();
  wait_for_request();
}

// Closing with unread request bytes would reset the connection and could destroy the reply
// before the client reads it (a 413 for a body still arriving): stop sending, read and drop what
// still comes for a moment, then close.
void HttpSession::linger_close() {
  state_ = State::Lingering;
  error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  stream_.expires_after(kLingerTime);
  discard_more();
}

void HttpSession::discard_more() {
  buffer_.clear();
  stream_.async_read_some(buffer_.prepare(64u << 10), [self = shared_from_this()](error_code ec, size_t) {
    if (ec || self->state_ != State::Lingering) return self->close();
    self->discard_more();
  });
}

void HttpSession::refuse(int status, const std::string& message, const std::string& code) {
  keep_alive_ = false;
  state_ = State::Responding;
  host_.responding(true);
  on_reply(Reply{error_response(ApiError(status, message, "", "invalid_request_error", code)), nullptr});
}

void HttpSession::client_gone() {
  if (pending_) {
    pending_->abandon();
    pending_.reset();
  }
  close();
}

void HttpSession::close() {
  if (state_ == State::Closed) return;
  if (state_ == State::Handling || state_ == State::Responding) host_.responding(false);
  state_ = State::Closed;
  if (pending_) {
    pending_->abandon();
    pending_.reset();
  }
  write_timer_.cancel();
  error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.close();
  host_.session_closed(this);
}

}  // namespace lockstep::server
