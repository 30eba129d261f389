#include "server/routes.h"

#include <chrono>

#include "core/error.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/metrics_text.h"
#include "server/request_parse.h"
#include "server/response_format.h"
#include "server/responses_api.h"

namespace lockstep::server {

namespace {

using json = nlohmann::ordered_json;

constexpr const char* kModelPrefix = "/v1/models/";

// The methods each path answers; another method gets 405 with Allow (not 404: the path exists).
const char* allowed_method(const std::string& path) {
  if (path == "/v1/completions" || path == "/v1/chat/completions" || path == "/v1/responses" ||
      path == "/tokenize" || path == "/detokenize")
    return "POST";
  if (path == "/v1/models" || path == "/health" || path == "/metrics") return "GET";
  if (path.rfind(kModelPrefix, 0) == 0 && path.size() > std::string(kModelPrefix).size()) return "GET";
  return nullptr;
}

HttpResponse json_response(const json& j) {
  HttpResponse r;
  r.body = to_text(j);
  return r;
}

json model_card(const ServingContext& ctx, int64_t created) {
  return {{"id", ctx.model_name},
          {"object", "model"},
          {"created", created},
          {"owned_by", "lockstep"},
          {"context_length", ctx.context_tokens},
          // vLLM's name for the same limit, and the vocabulary token-id prompts draw from: what a
          // load generator needs to build valid prompts (lockstep bench-serve reads both).
          {"max_model_len", ctx.context_tokens},
          {"vocab_size", ctx.vocab_size}};
}

Reply generation(const HttpRequest& req, const ServingContext& ctx, HttpStats& stats, Endpoint ep) {
  const Body body = parse_body(req.body);
  const ParsedRequest p = ep == Endpoint::Chat ? parse_chat(body, ctx) : parse_completion(body, ctx);
  ++(ep == Endpoint::Chat ? stats.chat_completions : stats.completions);
  Reply reply;
  if (p.stream) {
    reply.response = stream_head();
    reply.pending = stream_response(p, ctx, stats);
  } else {
    reply.pending = whole_response(p, ctx, stats);
  }
  return reply;
}

HttpResponse tokenize(const HttpRequest& req, const ServingContext& ctx) {
  const Body body = parse_body(req.body);
  if (has(body, "messages")) {  // a chat: the exact prompt ids /v1/chat/completions would run
    const std::string text = render_chat_prompt(body, ctx);
    check_prompt_bytes(text, ctx, "messages");
    return json_response(json{{"tokens", ctx.tokenizer->encode(text, false)}});
  }
  const char* field = has(body, "content") ? "content" : "prompt";
  const auto text = get_string(body, field);
  if (!text) bad_field("content", "required (a string)", "missing_required_parameter");
  if (!ctx.tokenizer) bad_field(field, "the model has no tokenizer.json", "no_tokenizer");
  check_prompt_bytes(*text, ctx, field);
  // Default as a completion prompt is encoded (and `lockstep generate -p`): with special tokens.
  const bool add_special = get_bool(body, "add_special").value_or(true);
  return json_response(json{{"tokens", ctx.tokenizer->encode(*text, add_special)}});
}

HttpResponse detokenize(const HttpRequest& req, const ServingContext& ctx) {
  const Body body = parse_body(req.body);
  if (!has(body, "tokens")) bad_field("tokens", "required (a list of token ids)", "missing_required_parameter");
  const Body& list = body.at("tokens");
  if (!list.is_array()) bad_field("tokens", "expected a list of token ids, got " + json_kind(list), "invalid_type");
  std::vector<int32_t> ids;
  for (const auto& v : list) {
    if (!v.is_number_integer() && !v.is_number_unsigned())
      bad_field("tokens", "expected integers, found " + json_kind(v), "invalid_type");
    const int64_t id = v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? INT64_MAX : v.get<int64_t>();
    if (id < 0 || id >= ctx.vocab_size)
      bad_field("tokens", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                              std::to_string(ctx.vocab_size) + ")", "invalid_value");
    ids.push_back(static_cast<int32_t>(id));
  }
  if (!ctx.tokenizer) bad_field("tokens", "the model has no tokenizer.json", "no_tokenizer");
  const bool skip = get_bool(body, "skip_special").value_or(false);
  return json_response(json{{"content", ctx.tokenizer->decode(ids, skip)}});
}

}  // namespace

Routes::Routes(const ServingContext& ctx, HttpStats& stats, const std::atomic<bool>& draining)
    : ctx_(ctx), stats_(stats), draining_(draining),
      started_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch()).count()) {}

std::optional<HttpResponse> Routes::check_head(const HttpRequest& head) const {
  // The key first: without it a client learns nothing, not even which paths exist.
  if (!ctx_.config.api_key.empty() && !is_public_path(head.path) &&
      !bearer_ok(head.header("authorization"), ctx_.config.api_key)) {
    const bool given = head.headers.count("authorization") > 0;
    return error_response(ApiError(401, given ? "invalid API key (Authorization: Bearer <key>)"
                                              : "missing API key: send Authorization: Bearer <key>",
                                   "Authorization", "invalid_request_error", "invalid_api_key"));
  }
  const char* allow = allowed_method(head.path);
  if (!allow)
    return error_response(ApiError(404, "no route for " + head.method + " " + head.path, "",
                                   "invalid_request_error", "not_found"));
  // HEAD is GET without the body (the session drops it).
  if (head.method != allow && !(head.method == "HEAD" && std::string(allow) == "GET")) {
    HttpResponse r = error_response(ApiError(405, head.method + " is not allowed on " + head.path + " (use " +
                                                      allow + ")", "", "invalid_request_error",
                                             "method_not_allowed"));
    r.headers.emplace_back("Allow", allow);
    return r;
  }
  return std::nullopt;
}

Reply Routes::handle(const HttpRequest& req) const {
  try {
    return dispatch(req);
  } catch (const ApiError& e) {
    return {error_response(e), nullptr};
  } catch (const Error& e) {
    return {error_response(from_engine_error(e.what())), nullptr};
  } catch (const std::exception& e) {
    return {error_response(ApiError(500, std::string("internal error: ") + e.what(), "", "server_error")), nullptr};
  }
}

Reply Routes::dispatch(const HttpRequest& req) const {
  const std::string& path = req.path;
  if (path == "/v1/completions") return generation(req, ctx_, stats_, Endpoint::Completion);
  if (path == "/v1/chat/completions") return generation(req, ctx_, stats_, Endpoint::Chat);
  if (path == "/v1/responses") return responses_reply(parse_body(req.body), ctx_, stats_);
  if (path == "/tokenize") return {tokenize(req, ctx_), nullptr};
  if (path == "/detokenize") return {detokenize(req, ctx_), nullptr};
  if (path == "/v1/models")
    return {json_response(json{{"object", "list"}, {"data", json::array({model_card(ctx_, started_)})}}), nullptr};
  if (path == "/health") {
    HttpResponse r;
    r.status = draining_ ? 503 : 200;
    r.body = draining_ ? R"({"status":"draining"})" : R"({"status":"ok"})";
    return {r, nullptr};
  }
  if (path == "/metrics") {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = metrics_text(ctx_.engine->metrics(), stats_);
    return {r, nullptr};
  }
  const std::string id = path.substr(std::string(kModelPrefix).size());  // check_head: /v1/models/{id}
  if (id != ctx_.model_name && id != "default")
    throw ApiError(404, "model \"" + id + "\" is not served here", "model", "invalid_request_error",
                   "model_not_found");
  return {json_response(model_card(ctx_, started_)), nullptr};
}

}  // namespace lockstep::server
