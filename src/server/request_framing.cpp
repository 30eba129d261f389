#include "server/request_framing.h"

namespace lockstep::server {

namespace {

ApiError bad_framing(const std::string& message) {
  return ApiError(400, message, "", "invalid_request_error", "invalid_framing");
}

}  // namespace

std::optional<ApiError> framing_error(const httplib::Headers& headers) {
  if (headers.size() > kMaxHeaders)
    return ApiError(431, "too many header fields (" + std::to_string(headers.size()) + "; at most " +
                             std::to_string(kMaxHeaders) + ")",
                    "", "invalid_request_error", "headers_too_large");
  // httplib enforces the body limit on Content-Length alone; a chunked body would grow unbounded.
  if (headers.count("Transfer-Encoding"))
    return ApiError(411, "Transfer-Encoding request bodies are not accepted: send the body with Content-Length",
                    "", "invalid_request_error", "length_required");
  const size_t lengths = headers.count("Content-Length");
  if (lengths > 1) return bad_framing("Content-Length given " + std::to_string(lengths) + " times");
  if (lengths == 1) {
    const std::string& v = headers.find("Content-Length")->second;
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
      return bad_framing("Content-Length must be a decimal number of bytes, got \"" + v.substr(0, 32) + "\"");
  }
  return std::nullopt;
}

}  // namespace lockstep::server
