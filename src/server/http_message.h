// What the routes see of HTTP, whatever carries it (src/server/http_session.cpp reads and writes
// the bytes): a parsed request, and a reply that is either complete or waits for the engine.
// A waiting reply holds no thread: the engine wakes it, and the connection polls it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query string
  std::map<std::string, std::string> headers;  // names lowercased; the last value of a repeated name
  std::string body;

  std::string header(const std::string& lowercase_name) const {
    auto it = headers.find(lowercase_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // beyond Content-Type/-Length
  std::string body;
};

// A response that waits for engine events (a generation request). The connection registers a wake
// (called on the engine's waker thread whenever poll may make progress), then calls poll on its
// own executor until it returns true.
class PendingResponse {
 public:
  virtual ~PendingResponse() = default;
  // Streaming responses send `head` (status and headers) at once and their body as it is made;
  // whole responses send `head` with the body when poll reports the end.
  virtual bool streaming() const = 0;
  virtual void set_wake(std::function<void()> wake) = 0;
  // Appends what is ready to `out` (streaming: body bytes; whole: the complete body, once, with
  // `head` final). Returns true when the response is complete.
  virtual bool poll(std::string& out, HttpResponse& head) = 0;
  // The client left (or the connection failed): cancel the sequences, free their memory.
  virtual void abandon() = 0;
};

// A route's answer: `pending` set means the response is produced later (then `response` holds
// the head for a stream).
struct Reply {
  HttpResponse response;
  std::shared_ptr<PendingResponse> pending;
};

}  // namespace lockstep::server
