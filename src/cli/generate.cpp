// lockstep generate: classic decode from a text prompt or token ids.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/constraint_flags.h"
#include "cli/spec_flags.h"
#include "core/error.h"
#include "decode/constraint_tracker.h"
#include "decode/generate.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {
namespace {

struct GenerateFlags {
  ModelFlags model;
  SpecFlags spec;
  ConstraintFlags constraint;
  std::string prompt, prompt_ids;
  int64_t max_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop;
  int64_t prefill_chunk = 0;
  bool json = false, ignore_eos = false;
};

int run_generate(const GenerateFlags& f) {
  if (f.prompt.empty() == f.prompt_ids.empty())
    fail("give exactly one of -p/--prompt TEXT or --prompt-ids 1,2,3");
  const std::string dir = resolve_model_dir(f.model);
  auto tokenizer = load_tokenizer_if_present(dir);
  std::vector<int32_t> prompt;
  if (!f.prompt_ids.empty()) {
    prompt = parse_id_list(f.prompt_ids, "--prompt-ids");
  } else {
    if (!tokenizer) fail(dir, " has no tokenizer.json: use --prompt-ids instead of -p");
    prompt = tokenizer->encode(f.prompt, /*add_special=*/true);
    if (prompt.empty()) fail("-p: the prompt encodes to no tokens");
  }
  ModelFlags mf = f.model;
  mf.dir = dir;
  auto model = load_model_from_flags(mf, static_cast<int64_t>(prompt.size()) + f.max_tokens);

  apply_numerics(f.spec);
  GenerateOptions o;
  o.sampling = f.sampling;
  DraftHolder draft_model;
  auto drafter = make_drafter(f.spec, dir, *model, f.sampling, draft_model);
  o.drafter = drafter.get();
  o.draft_width = f.spec.draft_width > 0 ? f.spec.draft_width : default_draft_width(f.spec.spec);
  o.max_tokens = f.max_tokens;
  o.stop = f.stop;
  o.prefill_chunk = f.prefill_chunk;
  if (!f.ignore_eos) o.eos_ids = eos_ids_for(model->config(), tokenizer.get());
  o.tokenizer = tokenizer.get();
  // With --ignore-eos the constraint has no EOS either: the output goes on while the grammar
  // admits more and stops where it has ended.
  o.constraint = compile_constraint_flags(f.constraint, tokenizer.get(), model->config(), o.eos_ids,
                                          /*with_end_of_turn=*/!f.ignore_eos);

  std::unique_ptr<StreamDecoder> stream;
  if (tokenizer && !f.json) stream = std::make_unique<StreamDecoder>(*tokenizer);
  std::fprintf(stderr, "lockstep: %s, %zu prompt tokens, up to %lld new\n", dir.c_str(),
               prompt.size(), static_cast<long long>(f.max_tokens));
  // The prompt is echoed first so stdout reads as one text (ids-only prompts are not echoed).
  if (stream && !f.prompt.empty()) {
    std::fputs(f.prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  // Text streams to stdout as it is produced, except past a stop string (held back until known).
  const bool hold_back = !f.stop.empty();
  GenerateResult r = generate(*model, prompt, o, [&](int32_t id) {
    if (stream && !hold_back) {
      std::fputs(stream->push(id).c_str(), stdout);
      std::fflush(stdout);
    } else if (!tokenizer && !f.json) {
      std::printf("%d ", id);
      std::fflush(stdout);
    }
    return true;
  });

  std::string text;
  if (tokenizer) {
    text = tokenizer->decode(r.tokens, true);
    if (r.text_limit != std::string::npos) text.resize(r.text_limit);
  }
  if (f.json) {
    nlohmann::json j;
    j["ids"] = r.tokens;
    j["text"] = text;
    j["finish_reason"] = r.finish_reason;
    if (o.constraint) j["constraint"] = to_string(check_constraint(*o.constraint, r.tokens));
    j["prompt_tokens"] = r.stats.prompt_tokens;
    j["timings"] = {{"prefill_seconds", r.stats.prefill_seconds},
                    {"decode_seconds", r.stats.decode_seconds},
                    {"prefill_tok_s", r.stats.prefill_tok_s()},
                    {"decode_tok_s", r.stats.decode_tok_s()}};
    if (drafter)
      j["spec"] = {{"mode", f.spec.spec},
                   {"width", o.draft_width},
                   {"rounds", r.spec.rounds},
                   {"drafted", r.spec.drafted},
                   {"accepted", r.spec.accepted},
                   {"acceptance", r.spec.acceptance()},
                   {"mean_accepted_per_round", r.spec.mean_accepted_per_round()}};
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    if (stream && !hold_back) std::fputs(stream->flush().c_str(), stdout);
    if (hold_back) std::fputs(text.c_str(), stdout);
    std::fputs("\n", stdout);
  }
  std::fprintf(stderr,
               "lockstep: prefill %lld tokens %.1f tok/s | decode %lld tokens %.2f tok/s | %s\n",
               static_cast<long long>(r.stats.prompt_tokens), r.stats.prefill_tok_s(),
               static_cast<long long>(r.stats.generated_tokens), r.stats.decode_tok_s(),
               r.finish_reason.c_str());
  if (drafter)
    std::fprintf(stderr, "lockstep: spec %s width %d: %lld rounds, acceptance %.3f, %.2f accepted/round\n",
                 f.spec.spec.c_str(), o.draft_width, static_cast<long long>(r.spec.rounds),
                 r.spec.acceptance(), r.spec.mean_accepted_per_round());
  return 0;
}

const Command kGenerate("generate", "Generate text (classic decode)", [](CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  add_model_flags(app, f->model, false);
  add_spec_flags(app, f->spec);
  add_constraint_flags(app, f->constraint);
  app.add_option("-p,--prompt", f->prompt, "Prompt text (encoded with the model's tokenizer)");
  app.add_option("--prompt-ids", f->prompt_ids, "Prompt as token ids: 1,2,3");
  app.add_option("-n,--max-tokens", f->max_tokens, "Tokens to generate (default 128)")
      ->check(CLI::NonNegativeNumber);
  add_sampling_flags(app, f->sampling);
  app.add_option("--stop", f->stop, "Stop string (repeatable)");
  app.add_option("--prefill-chunk", f->prefill_chunk, "Prefill in chunks of N tokens (0: whole)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--ignore-eos", f->ignore_eos, "Do not stop at end-of-sequence tokens");
  app.add_flag("--json", f->json, "Print {\"ids\", \"text\", \"timings\"} as JSON");
  return [f] { return run_generate(*f); };
});

}  // namespace
}  // namespace lockstep::cli
