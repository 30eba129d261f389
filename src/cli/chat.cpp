// lockstep chat: an interactive conversation in the terminal. Each turn renders the whole
// conversation with the model's chat template (as the server's /v1/chat/completions does) and
// streams the reply from the same engine the server runs, so a reply here is the reply the
// server gives to the same messages and parameters.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "cli/command.h"
#include "cli/serving_setup.h"
#include "core/error.h"
#include "scheduler/engine.h"
#include "server/choice_text.h"

namespace lockstep::cli {
namespace {

struct ChatFlags {
  ModelFlags model;
  SpecFlags spec;
  std::string system;
  SamplingParams sampling;
  int64_t max_tokens = 512;
};

// One assistant reply, streamed to stdout; returns its text.
std::string reply(Engine& engine, const ServingBundle& b, const ChatFlags& f, std::vector<int32_t> prompt) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.options.sampling = f.sampling;
  r.options.eos_ids = b.eos_ids;
  r.options.tokenizer = b.tokenizer.get();
  r.spec = f.spec.spec;
  r.draft_width = f.spec.draft_width;
  const int64_t room = b.context_tokens - static_cast<int64_t>(r.prompt.size()) - 17;
  if (room < 1) fail("the conversation (", r.prompt.size(), " tokens) fills the context of ",
                     b.context_tokens, " tokens: /reset to start over");
  r.options.max_tokens = std::min(f.max_tokens, room);
  auto stream = engine.submit(std::move(r));
  server::ChoiceText text(b.tokenizer.get(), {});
  for (;;) {
    StreamEvent ev;
    if (!stream->next(ev, std::chrono::milliseconds(1000))) continue;
    if (ev.kind == StreamEvent::Kind::Token) {
      std::fputs(text.push(ev.token).c_str(), stdout);
      std::fflush(stdout);
      continue;
    }
    if (ev.finish_reason == "error") fail("generation failed: ", ev.error);
    std::fputs(text.finish(ev.text_limit).c_str(), stdout);
    if (ev.finish_reason == "length") std::fputs(" [max tokens]", stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    return text.sent();
  }
}

int run_chat(const ChatFlags& f) {
  apply_numerics(f.spec);
  ServingBundle b = load_serving_bundle(f.model, f.spec, f.model.ctx_size);
  if (!b.chat_template) fail("chat needs a chat template: ", b.chat_template_error);
  EngineOptions eo;
  eo.parallel = 1;
  Engine engine(*b.model, eo, b.draft.get(), b.assistant.get());

  const bool tty = isatty(STDIN_FILENO);
  if (tty) std::fprintf(stderr, "lockstep chat: %s. /exit or Ctrl-D quits, /reset forgets.\n", b.dir.c_str());
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  auto reset = [&] {
    messages = nlohmann::ordered_json::array();
    if (!f.system.empty()) messages.push_back({{"role", "system"}, {"content", f.system}});
  };
  reset();
  std::string line;
  for (;;) {
    if (tty) std::fputs("> ", stderr);
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      reset();
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    nlohmann::ordered_json vars = b.template_vars;
    vars["add_generation_prompt"] = true;
    const std::string text = b.chat_template->render(messages, vars);
    try {
      const std::string answer = reply(engine, b, f, b.tokenizer->encode(text, false));
      messages.push_back({{"role", "assistant"}, {"content", answer}});
    } catch (const Error& e) {
      messages.erase(messages.end() - 1);  // the turn did not happen
      std::fprintf(stderr, "lockstep: %s\n", e.what());
    }
  }
  return 0;
}

const Command kChat("chat", "Interactive chat in the terminal (the model's chat template)", [](CLI::App& app) {
  auto f = std::make_shared<ChatFlags>();
  add_model_flags(app, f->model, false);
  add_spec_flags(app, f->spec);
  app.add_option("--system", f->system, "System prompt");
  app.add_option("-n,--max-tokens", f->max_tokens, "Most tokens per reply (default 512)")
      ->check(CLI::PositiveNumber);
  add_sampling_flags(app, f->sampling);
  return [f] { return run_chat(*f); };
});

}  // namespace
}  // namespace lockstep::cli
