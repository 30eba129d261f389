#include "client/http_client.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace lockstep::client {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// Runs one asynchronous operation to its end on `io` and returns its error: the tcp_stream's
// timeouts apply to asynchronous operations only, so this blocking client is built from them.
template <class Start>
beast::error_code await(net::io_context& io, Start start) {
  beast::error_code result;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  io.restart();
  io.run();
  return result;
}

}  // namespace

Url parse_url(const std::string& text, const std::string& flag) {
  const std::string scheme = "http://";
  if (text.rfind("https://", 0) == 0)
    fail(flag, ": \"", text, "\": https is not supported (plain http:// only)");
  if (text.rfind(scheme, 0) != 0)
    fail(flag, ": \"", text, "\": expected http://HOST[:PORT][/PATH]");
  Url u;
  u.text = text;
  std::string rest = text.substr(scheme.size());
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    u.base_path = rest.substr(slash);
    rest.resize(slash);
    while (!u.base_path.empty() && u.base_path.back() == '/') u.base_path.pop_back();
  }
  const size_t colon = rest.rfind(':');
  const bool bracketed = !rest.empty() && rest.front() == '[';  // [::1]:8080
  if (colon != std::string::npos && (!bracketed || colon > rest.find(']'))) {
    u.host = rest.substr(0, colon);
    u.port = rest.substr(colon + 1);
  } else {
    u.host = rest;
    u.port = "80";
  }
  if (bracketed && u.host.size() >= 2) u.host = u.host.substr(1, u.host.size() - 2);
  if (u.host.empty()) fail(flag, ": \"", text, "\": no host");
  if (u.port.empty() || u.port.find_first_not_of("0123456789") != std::string::npos || u.port.size() > 5 ||
      std::stoi(u.port) < 1 || std::stoi(u.port) > 65535)
    fail(flag, ": \"", text, "\": the port must be a number from 1 to 65535");
  return u;
}

HttpConnection::HttpConnection(Url url, std::string api_key, std::chrono::seconds timeout)
    : url_(std::move(url)), api_key_(std::move(api_key)), timeout_(timeout), stream_(io_) {}

void HttpConnection::connect() {
  if (open_) return;
  beast::error_code ec;
  net::ip::tcp::resolver resolver(io_);
  const auto endpoints = resolver.resolve(url_.host, url_.port, ec);
  if (ec) throw ConnectionError("cannot resolve the host of " + url_.text + ": " + ec.message());
  stream_.expires_after(timeout_);
  ec = await(io_, [&](auto handler) { stream_.async_connect(endpoints, handler); });
  if (ec)
    throw ConnectionError("cannot connect to " + url_.text + ": " + ec.message() +
                          " (is the server running and listening there?)");
  // Requests are small and latency is what is measured: do not let Nagle hold them back.
  stream_.socket().set_option(net::ip::tcp::no_delay(true), ec);
  open_ = true;
}

void HttpConnection::close() {
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.close();
  buffer_.clear();
  open_ = false;
}

HttpReply HttpConnection::get(const std::string& path) {
  HttpReply r;
  r.status = exchange("GET", path, "", [&](std::string_view piece) { r.body.append(piece); });
  return r;
}

int HttpConnection::post(const std::string& path, const std::string& json_body,
                         const std::function<void(std::string_view)>& on_data) {
  return exchange("POST", path, json_body, on_data);
}

int HttpConnection::exchange(const std::string& method, const std::string& path, const std::string& body,
                             const std::function<void(std::string_view)>& on_data) {
  const bool reused = open_;
  bool nothing_read = true;
  try {
    return exchange_once(method, path, body, on_data, nothing_read);
  } catch (const ConnectionError&) {
    close();
    // A kept-alive connection the server closed meanwhile (its idle timeout) fails before any
    // reply byte: the request never ran, so it is sent again on a new connection.
    if (!reused || !nothing_read) throw;
  }
  return exchange_once(method, path, body, on_data, nothing_read);
}

int HttpConnection::exchange_once(const std::string& method, const std::string& path, const std::string& body,
                                  const std::function<void(std::string_view)>& on_data, bool& nothing_read) {
  nothing_read = true;
  connect();
  const std::string target = url_.base_path + path;
  http::request<http::string_body> req{method == "GET" ? http::verb::get : http::verb::post, target, 11};
  req.set(http::field::host, url_.port == "80" ? url_.host : url_.host + ":" + url_.port);
  req.set(http::field::user_agent, "lockstep-bench-serve");
  if (!api_key_.empty()) req.set(http::field::authorization, "Bearer " + api_key_);
  if (method != "GET") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.keep_alive(true);
  req.prepare_payload();
  auto failed = [&](const char* doing, beast::error_code ec) {
    const std::string why = ec == beast::error::timeout
                                ? "nothing for " + std::to_string(timeout_.count()) + " s (--timeout)"
                                : ec.message();
    return ConnectionError(method + " " + url_.text + path + ": " + doing + ": " + why);
  };
  stream_.expires_after(timeout_);
  beast::error_code ec = await(io_, [&](auto handler) { http::async_write(stream_, req, handler); });
  if (ec) throw failed("sending the request", ec);

  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  stream_.expires_after(timeout_);
  ec = await(io_, [&](auto handler) { http::async_read_header(stream_, buffer_, parser, handler); });
  if (ec) throw failed("reading the reply", ec);
  nothing_read = false;
  const int status = static_cast<int>(parser.get().result_int());
  char piece[16384];
  while (!parser.is_done()) {
    parser.get().body().data = piece;
    parser.get().body().size = sizeof piece;
    stream_.expires_after(timeout_);
    // Returns with whatever arrived, so the caller sees each piece when it comes.
    ec = await(io_, [&](auto handler) { http::async_read_some(stream_, buffer_, parser, handler); });
    if (ec == http::error::need_buffer) ec = {};
    if (ec) throw failed("reading the reply body", ec);
    const size_t n = sizeof piece - parser.get().body().size;
    if (n > 0) on_data(std::string_view(piece, n));
  }
  if (!parser.get().keep_alive()) close();
  return status;
}

}  // namespace lockstep::client
