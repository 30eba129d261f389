// Fuzzes what a client's body goes through before anything is queued: parse_body (the nesting
// limit, number range, object check), the conversion to chat-template values and back
// (chat::from_json / to_json), and render_chat_prompt through a template that walks every value
// (tests/chat/templates/feature_tour.jinja: tools | tojson, tool_calls, message fields).
// Checked: no crash or stack overflow; only ApiError escapes (anything else would be a 500);
// every body parse_body accepts converts to template values, and their tojson is valid JSON.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "chat/builtins.h"
#include "chat/chat_template.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/request_parse.h"

namespace {

lockstep::server::ServingContext make_context() {
  std::ifstream in(LOCKSTEP_FUZZ_TEMPLATE, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  lockstep::server::ServingContext ctx;
  ctx.chat_template = std::make_shared<const lockstep::ChatTemplate>(s.str());
  ctx.template_vars = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  static const server::ServingContext ctx = make_context();
  const std::string text(reinterpret_cast<const char*>(data), size);
  server::Body body;
  try {
    body = server::parse_body(text);
  } catch (const server::ApiError&) {
    return 0;
  }
  // parse_body's depth limit is below chat's, so this must not throw.
  const chat::Value value = chat::from_json(body);
  if (!nlohmann::json::accept(chat::to_json(value, {}))) std::abort();
  try {
    (void)server::render_chat_prompt(body, ctx);
  } catch (const server::ApiError&) {
  }
  return 0;
}
