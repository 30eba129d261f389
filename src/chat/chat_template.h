// Chat templates: render a conversation with a model's Jinja chat template exactly as Hugging
// Face transformers' apply_chat_template does (Jinja2 with trim_blocks and lstrip_blocks, its
// tojson/raise_exception/strftime_now, loop controls and the {% generation %} tag).
//
//   ChatTemplate t(config["chat_template"]);          // parse once (throws lockstep::Error)
//   std::string prompt = t.render(messages, {{"add_generation_prompt", true},
//                                            {"bos_token", "<s>"}, {"enable_thinking", false}});
//
// Options: every key becomes a template variable (bos_token, eos_token, enable_thinking, ...).
// add_generation_prompt defaults to false and tools/documents to none, as transformers passes
// them. One key is reserved: "strftime_now" (a string "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM:SS")
// fixes the date that strftime_now() formats, so renders are reproducible; without it the local
// time is used.
//
// Key order matters to `tojson` (tools are printed as JSON): pass nlohmann::ordered_json to keep
// the client's order, as Python does. With plain nlohmann::json, keys arrive sorted.
//
// Errors (syntax, raise_exception, undefined access, type errors) are lockstep::Error whose
// message starts with "chat template line L, column C: ".
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace lockstep::chat {

struct Stmt;

class ChatTemplate {
 public:
  explicit ChatTemplate(const std::string& source);
  ~ChatTemplate();
  ChatTemplate(const ChatTemplate&) = default;
  ChatTemplate& operator=(const ChatTemplate&) = default;

  // Thread-safe: a parsed template is immutable and each render has its own state.
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& options) const;
  std::string render(const nlohmann::json& messages, const nlohmann::json& options) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

// The template text of a tokenizer_config.json: `chat_template` as a string, or the entry called
// `name` when it is a list of {name, template}. Throws lockstep::Error when there is none.
std::string template_from_config(const nlohmann::json& config, const std::string& name = "default");
// The special tokens transformers passes to templates (bos_token, eos_token, unk_token, pad_token,
// ...), as strings, from a tokenizer_config.json (plain strings or AddedToken objects).
nlohmann::ordered_json special_tokens_from_config(const nlohmann::json& config);

}  // namespace lockstep::chat

namespace lockstep {

// One-shot convenience: parse and render.
std::string render_chat(const std::string& template_source, const nlohmann::json& messages,
                        const nlohmann::json& options);
std::string render_chat(const std::string& template_source, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& options);

}  // namespace lockstep

namespace lockstep {
using chat::ChatTemplate;
}  // namespace lockstep
