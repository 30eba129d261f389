#include "server/api_error.h"

#include <cctype>
#include <set>

namespace lockstep::server {

void bad_field(const std::string& param, const std::string& message, const std::string& code) {
  throw ApiError(400, param.empty() ? message : param + ": " + message, param,
                 "invalid_request_error", code);
}

nlohmann::json error_body(const ApiError& e) {
  nlohmann::json err;
  err["message"] = e.what();
  err["type"] = e.type;
  err["param"] = e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param);
  err["code"] = e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code);
  return {{"error", err}};
}

HttpResponse error_response(const ApiError& e) {
  HttpResponse r;
  r.status = e.status;
  if (e.retry_after > 0) r.headers.emplace_back("Retry-After", std::to_string(e.retry_after));
  // Messages may quote client bytes that are not UTF-8.
  r.body = error_body(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

ApiError from_engine_error(const std::string& message) {
  // Engine and sampler messages lead with the field ("max_tokens: ...", "top_p must be ...").
  static const std::set<std::string> kFields = {
      "prompt", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop",
      "presence_penalty", "frequency_penalty", "repetition_penalty", "top_logprobs",
      "logprobs", "spec", "draft_width", "messages"};
  size_t end = 0;
  while (end < message.size() && (std::isalnum(static_cast<unsigned char>(message[end])) ||
                                  message[end] == '_'))
    ++end;
  const std::string head = message.substr(0, end);
  std::string code;
  if (message.find("exceeds the context") != std::string::npos) code = "context_length_exceeded";
  if (kFields.count(head)) return ApiError(400, message, head, "invalid_request_error", code);
  return ApiError(400, message, "", "invalid_request_error", code);
}

}  // namespace lockstep::server
