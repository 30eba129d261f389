// Errors a client sees. Every rejected request becomes one ApiError, rendered as OpenAI's error
// object {"error": {"message", "type", "param", "code"}} with an HTTP status, so clients written
// for OpenAI report our failures the way they report theirs, naming the field at fault.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "server/http_message.h"

namespace lockstep::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "",
           std::string type = "invalid_request_error", std::string code = "")
      : std::runtime_error(std::move(message)),
        status(status),
        param(std::move(param)),
        type(std::move(type)),
        code(std::move(code)) {}

  int status;
  std::string param;  // the request field at fault ("" when none)
  std::string type;   // invalid_request_error, authentication_error, server_error, ...
  std::string code;   // a stable machine-readable reason ("" when none)
  int retry_after = 0;  // seconds, sent as Retry-After when > 0 (503: queue full)
};

// 400 for a field: "<param>: <message>" is what the client reads, so messages stay short.
[[noreturn]] void bad_field(const std::string& param, const std::string& message,
                            const std::string& code = "");

// {"error": {...}}; param and code are null when empty, as OpenAI sends them.
nlohmann::json error_body(const ApiError& e);

// The error as an HTTP response (status, Retry-After when set, the JSON body).
HttpResponse error_response(const ApiError& e);

// A lockstep::Error from the engine or the sampler ("max_tokens: ...", "top_p must be ...") as a
// 400 whose param is the leading field name when the message starts with one.
ApiError from_engine_error(const std::string& message);

}  // namespace lockstep::server
