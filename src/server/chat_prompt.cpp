// Chat messages -> prompt text with the checkpoint's own template (src/chat/), rendered as
// transformers' apply_chat_template(messages, add_generation_prompt=True) would.
#include "core/error.h"
#include "server/api_error.h"
#include "server/request_parse.h"
#include "server/tool_request.h"

namespace lockstep::server {

namespace {

// OpenAI lets content be a list of parts; templates written for text expect a string, so text
// parts are joined. Other part types (images, audio) cannot be served by a text model.
Body normalize_content(const Body& content, size_t i) {
  const std::string field = "messages[" + std::to_string(i) + "].content";
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array())
    bad_field(field, "expected a string or a list of content parts, got " + json_kind(content), "invalid_type");
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object() || part.value("type", std::string()) != "text" ||
        !part.contains("text") || !part["text"].is_string())
      bad_field(field, "only {\"type\": \"text\", \"text\": \"...\"} parts are supported", "invalid_value");
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

std::string render_chat_prompt(const Body& body, const ServingContext& ctx) {
  if (!ctx.chat_template)
    throw ApiError(400, "the model has no chat template (tokenizer_config.json chat_template); use "
                        "/v1/completions", "messages", "invalid_request_error", "no_chat_template");
  if (!has(body, "messages")) bad_field("messages", "required", "missing_required_parameter");
  const Body& in = body.at("messages");
  if (!in.is_array()) bad_field("messages", "expected an array, got " + json_kind(in), "invalid_type");
  if (in.empty()) bad_field("messages", "at least one message is needed", "invalid_value");

  Body messages = Body::array();
  for (size_t i = 0; i < in.size(); ++i) {
    const Body& m = in[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad_field(at, "expected an object, got " + json_kind(m), "invalid_type");
    if (!m.contains("role") || !m["role"].is_string())
      bad_field(at + ".role", "required string", "invalid_type");
    // Every field kept (name, tool_calls, ...) in the client's key order; tool calls checked and
    // their arguments given to the template as objects.
    Body msg = template_message(m, i);
    if (msg.contains("content")) {
      msg["content"] = normalize_content(msg["content"], i);
    } else if (m["role"] != "assistant") {
      bad_field(at + ".content", "required", "missing_required_parameter");
    }
    messages.push_back(std::move(msg));
  }

  Body vars = ctx.template_vars;
  if (has(body, "chat_template_kwargs")) {  // extension (vLLM's name): enable_thinking, ...
    const Body& kw = body.at("chat_template_kwargs");
    if (!kw.is_object())
      bad_field("chat_template_kwargs", "expected an object, got " + json_kind(kw), "invalid_type");
    for (auto it = kw.begin(); it != kw.end(); ++it) vars[it.key()] = it.value();
  }
  if (auto tools = parse_tool_request(body)) vars["tools"] = tools->declared;
  vars["add_generation_prompt"] = true;
  try {
    return ctx.chat_template->render(messages, vars);
  } catch (const Error& e) {
    // raise_exception() in a template is how a model rejects a conversation (roles out of order).
    throw ApiError(400, std::string("messages: the chat template rejected them: ") + e.what(),
                   "messages", "invalid_request_error", "chat_template_error");
  }
}

}  // namespace lockstep::server
