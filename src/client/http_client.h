// A small blocking HTTP/1.1 client (Boost.Beast) for talking to an OpenAI-compatible server: one
// keep-alive connection, GET with the whole body, and POST whose body is handed over piece by
// piece as it arrives (server-sent events), so the caller can time every piece. One connection per
// thread; a load generator runs one per simulated client.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace lockstep::client {

// http://HOST[:PORT][/PATH]: where the server is; PATH prefixes every request path.
struct Url {
  std::string text;  // as given, for messages
  std::string host, port, base_path;
};
// Throws lockstep::Error naming `flag` for anything else (https included: plain HTTP only).
Url parse_url(const std::string& text, const std::string& flag);

// A failure to reach the server or a broken connection (not an HTTP error status).
class ConnectionError : public Error {
 public:
  using Error::Error;
};

struct HttpReply {
  int status = 0;
  std::string body;
};

class HttpConnection {
 public:
  // `api_key` (empty: none) is sent as "Authorization: Bearer KEY". `timeout`: the longest wait for
  // any one read or write (a stream may last longer, as long as bytes keep coming).
  HttpConnection(Url url, std::string api_key, std::chrono::seconds timeout);

  // Opens the connection now (otherwise the first request does). Throws ConnectionError.
  void connect();

  HttpReply get(const std::string& path);

  // POSTs a JSON body and returns the status. `on_data` receives the response body (de-chunked)
  // in the pieces it arrives in. Throws ConnectionError when the connection fails midway.
  int post(const std::string& path, const std::string& json_body,
           const std::function<void(std::string_view)>& on_data);

 private:
  // Sends one request and reads its reply; retried once on a fresh connection when a kept-alive
  // one turns out to be closed by the server before any reply byte came.
  int exchange(const std::string& method, const std::string& path, const std::string& body,
               const std::function<void(std::string_view)>& on_data);
  int exchange_once(const std::string& method, const std::string& path, const std::string& body,
                    const std::function<void(std::string_view)>& on_data, bool& nothing_read);
  void close();

  Url url_;
  std::string api_key_;
  std::chrono::seconds timeout_;
  boost::asio::io_context io_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  bool open_ = false;
};

}  // namespace lockstep::client
