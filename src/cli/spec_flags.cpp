#include "cli/spec_flags.h"

#include "cli/common.h"
#include "core/error.h"
#include "decode/speculative/drafters.h"
#include "kernels/numerics.h"

namespace lockstep::cli {

void add_numerics_flag(CLI::App& app, SpecFlags& f) {
  app.add_option("--numerics", f.numerics,
                 "exact (default: output independent of batch, chunking and speculation) or "
                 "fast (multi-row calls may reduce in another order; for measuring)")
      ->check(CLI::IsMember({"exact", "fast"}));
}

void add_spec_flags(CLI::App& app, SpecFlags& f) {
  app.add_option("--spec", f.spec,
                 "Speculative decoding: none, lookup (prompt n-grams), draft (--draft-model), "
                 "mtp (the model's MTP head), assistant (a Gemma 4 target's assistant drafter, "
                 "--draft-model DIR of a gemma4_assistant checkpoint). Never changes the output.")
      ->check(CLI::IsMember({"none", "lookup", "draft", "mtp", "assistant"}));
  app.add_option("--draft-width", f.draft_width, "Tokens drafted per round (default per mode)")
      ->check(CLI::Range(0, 16));
  app.add_option("--draft-model", f.draft_model,
                 "Draft model directory for --spec draft (default with the shipped target: "
                 "models/lockstep-draft-3m), or the Gemma 4 assistant (-it-assistant) for "
                 "--spec assistant");
  add_numerics_flag(app, f);
}

void apply_numerics(const SpecFlags& f) {
  kernels::set_numerics(f.numerics == "fast" ? kernels::Numerics::Fast : kernels::Numerics::Exact);
}


std::unique_ptr<Drafter> make_drafter(const SpecFlags& f, const std::string& target_dir,
                                      Model& target, const SamplingParams& sampling,
                                      DraftHolder& draft_holder) {
  if (f.spec != "draft" && f.spec != "assistant" && !f.draft_model.empty())
    fail("--draft-model needs --spec draft (a draft model) or --spec assistant (a Gemma 4 "
         "assistant)");
  if (f.spec == "assistant") {
    if (f.draft_model.empty()) fail("--spec assistant needs --draft-model DIR (a gemma4_assistant "
                                    "checkpoint, e.g. google/gemma-4-E2B-it-assistant)");
    draft_holder.assistant = load_gemma4_assistant(f.draft_model, target);
  }
  if (f.spec == "draft") {
    const std::string dir = f.draft_model.empty() ? default_draft_dir(target_dir) : f.draft_model;
    if (dir.empty()) fail("--spec draft needs --draft-model DIR");
    draft_holder.model = load_draft_model(
        dir, target, target.kv_pool().total_blocks() * target.kv_pool().block_tokens());
  }
  return lockstep::make_drafter(f.spec, target, draft_holder.model.get(), sampling,
                               draft_holder.assistant.get());
}

}  // namespace lockstep::cli
