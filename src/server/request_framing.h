// Checks on a request's head before its body is read or routed: framing that two parsers could
// read differently (request smuggling behind a proxy) or that no parser should wait on.
#pragma once

#include <httplib.h>

#include <optional>

#include "server/api_error.h"

namespace lockstep::server {

constexpr size_t kMaxHeaders = 100;            // header fields in one request
constexpr size_t kMaxBodyBytes = 64u << 20;    // request body (Content-Length)

// A 400 for a Content-Length that is not a plain decimal number or is given twice; a 411 for a
// Transfer-Encoding body (the body limit is enforced on Content-Length); a 431 for more than
// kMaxHeaders header fields; nothing when the head is fine.
std::optional<ApiError> framing_error(const httplib::Headers& headers);

}  // namespace lockstep::server
