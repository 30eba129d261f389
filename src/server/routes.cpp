#include "server/routes.h"

#include <chrono>
#include <functional>

#include "core/error.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/metrics_text.h"
#include "server/request_framing.h"
#include "server/request_parse.h"
#include "server/response_format.h"

namespace lockstep::server {

namespace {

using json = nlohmann::ordered_json;
using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.retry_after > 0) res.set_header("Retry-After", std::to_string(e.retry_after));
  res.set_content(to_text(error_body(e)), "application/json");
}

// Every handler runs inside this: whatever it throws, the client gets a JSON error.
Handler guarded(Handler h) {
  return [h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    try {
      h(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Error& e) {
      send_error(res, from_engine_error(e.what()));
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "", "server_error"));
    }
  };
}

void generation(const httplib::Request& req, httplib::Response& res, const ServingContext& ctx,
                HttpStats& stats, Endpoint ep) {
  const Body body = parse_body(req.body);
  const ParsedRequest p = ep == Endpoint::Chat ? parse_chat(body, ctx) : parse_completion(body, ctx);
  ++(ep == Endpoint::Chat ? stats.chat_completions : stats.completions);
  if (p.stream) {
    respond_stream(p, ctx, stats, res);
  } else {
    respond_whole(p, ctx, res);
  }
}

json model_card(const ServingContext& ctx, int64_t created) {
  return {{"id", ctx.model_name},
          {"object", "model"},
          {"created", created},
          {"owned_by", "lockstep"},
          {"context_length", ctx.context_tokens}};
}

void tokenize(const httplib::Request& req, httplib::Response& res, const ServingContext& ctx) {
  const Body body = parse_body(req.body);
  if (has(body, "messages")) {  // a chat: the exact prompt ids /v1/chat/completions would run
    const std::string text = render_chat_prompt(body, ctx);
    check_prompt_bytes(text, ctx, "messages");
    res.set_content(to_text(json{{"tokens", ctx.tokenizer->encode(text, false)}}), "application/json");
    return;
  }
  const char* field = has(body, "content") ? "content" : "prompt";
  const auto text = get_string(body, field);
  if (!text) bad_field("content", "required (a string)", "missing_required_parameter");
  if (!ctx.tokenizer) bad_field(field, "the model has no tokenizer.json", "no_tokenizer");
  check_prompt_bytes(*text, ctx, field);
  // Default as a completion prompt is encoded (and `lockstep generate -p`): with special tokens.
  const bool add_special = get_bool(body, "add_special").value_or(true);
  res.set_content(to_text(json{{"tokens", ctx.tokenizer->encode(*text, add_special)}}), "application/json");
}

void detokenize(const httplib::Request& req, httplib::Response& res, const ServingContext& ctx) {
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
  res.set_content(to_text(json{{"content", ctx.tokenizer->decode(ids, skip)}}), "application/json");
}

// The methods each path answers; another method gets 405 with Allow (not 404: the path exists).
struct PathMethods {
  const char* pattern;
  const char* allow;
};
constexpr PathMethods kPaths[] = {
    {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/tokenize", "POST"},
    {"/detokenize", "POST"},     {"/v1/models", "GET"},             {R"(/v1/models/(.+))", "GET"},
    {"/health", "GET"},          {"/metrics", "GET"},
};

void register_wrong_methods(httplib::Server& http) {
  for (const auto& p : kPaths) {
    const std::string allow = p.allow;
    auto refuse = [allow](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Allow", allow);
      send_error(res, ApiError(405, req.method + " is not allowed on " + req.path + " (use " + allow + ")",
                               "", "invalid_request_error", "method_not_allowed"));
    };
    if (allow != "GET") http.Get(p.pattern, refuse);
    if (allow != "POST") http.Post(p.pattern, refuse);
    http.Put(p.pattern, refuse);
    http.Patch(p.pattern, refuse);
    http.Delete(p.pattern, refuse);
  }
}

}  // namespace

void register_routes(httplib::Server& http, const ServingContext& ctx, HttpStats& stats,
                     const std::atomic<bool>& draining) {
  const int64_t started = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch()).count();

  // Runs after the head is read and before the body is: framing first, then the key.
  http.set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    if (auto e = framing_error(req.headers)) {
      send_error(res, *e);
      res.set_header("Connection", "close");  // the body that may follow cannot be framed
      return httplib::Server::HandlerResponse::Handled;
    }
    // No endpoint serves byte ranges: a Range header must not cut a JSON body into a 206. httplib
    // parsed it into `ranges` already; the request object is ours (passed const by convention).
    const_cast<httplib::Request&>(req).ranges.clear();
    if (ctx.config.api_key.empty() || is_public_path(req.path) ||
        bearer_ok(req.get_header_value("Authorization"), ctx.config.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    const bool given = req.has_header("Authorization");
    send_error(res, ApiError(401, given ? "invalid API key (Authorization: Bearer <key>)"
                                        : "missing API key: send Authorization: Bearer <key>",
                             "Authorization", "invalid_request_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Unknown paths and methods: a JSON 404/405 instead of an empty body. Handlers that already
  // wrote an error body keep it.
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = "HTTP " + std::to_string(res.status) + " for " + req.method + " " + req.path;
    if (res.status == 404) message = "no route for " + req.method + " " + req.path;
    if (res.status == 413) {
      // httplib also refuses form-encoded bodies over 8 KiB (curl -d sends that type by default).
      const bool form = req.get_header_value("Content-Type").find("x-www-form-urlencoded") != std::string::npos;
      message = form ? "request body too large: form-encoded bodies over 8 KiB are refused (send "
                       "Content-Type: application/json)"
                     : "request body too large: at most " + std::to_string(kMaxBodyBytes >> 20) + " MiB";
    }
    send_error(res, ApiError(res.status, message, "", "invalid_request_error",
                             res.status == 404 ? "not_found" : ""));
  });
  http.set_logger([&stats](const httplib::Request&, const httplib::Response& res) {
    if (res.status >= 500) ++stats.status_5xx;
    else if (res.status >= 400) ++stats.status_4xx;
    else ++stats.status_2xx;
  });

  http.Post("/v1/completions", guarded([&](const httplib::Request& q, httplib::Response& r) {
    generation(q, r, ctx, stats, Endpoint::Completion);
  }));
  http.Post("/v1/chat/completions", guarded([&](const httplib::Request& q, httplib::Response& r) {
    generation(q, r, ctx, stats, Endpoint::Chat);
  }));
  http.Get("/v1/models", guarded([&ctx, started](const httplib::Request&, httplib::Response& r) {
    r.set_content(to_text(json{{"object", "list"}, {"data", json::array({model_card(ctx, started)})}}),
                  "application/json");
  }));
  http.Get(R"(/v1/models/(.+))", guarded([&ctx, started](const httplib::Request& q, httplib::Response& r) {
    const std::string id = q.matches[1];
    if (id != ctx.model_name && id != "default")
      throw ApiError(404, "model \"" + id + "\" is not served here", "model", "invalid_request_error",
                     "model_not_found");
    r.set_content(to_text(model_card(ctx, started)), "application/json");
  }));
  http.Get("/health", [&draining](const httplib::Request&, httplib::Response& r) {
    r.status = draining ? 503 : 200;
    r.set_content(draining ? R"({"status":"draining"})" : R"({"status":"ok"})", "application/json");
  });
  http.Get("/metrics", guarded([&ctx, &stats](const httplib::Request&, httplib::Response& r) {
    r.set_content(metrics_text(ctx.engine->metrics(), stats), "text/plain; version=0.0.4");
  }));
  http.Post("/tokenize", guarded([&ctx](const httplib::Request& q, httplib::Response& r) { tokenize(q, r, ctx); }));
  http.Post("/detokenize", guarded([&ctx](const httplib::Request& q, httplib::Response& r) { detokenize(q, r, ctx); }));
  register_wrong_methods(http);
}

}  // namespace lockstep::server
