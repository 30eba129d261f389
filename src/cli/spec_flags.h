// Speculative-decoding and numerics flags shared by generate and verify.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "decode/speculative/drafters.h"
#include "models/model.h"
#include "sampling/sampler.h"

namespace lockstep::cli {

struct SpecFlags {
  std::string spec = "none";   // none | lookup | draft | mtp | assistant
  int draft_width = 0;         // 0: the mode's default
  std::string draft_model;
  std::string numerics = "exact";
};

void add_numerics_flag(CLI::App& app, SpecFlags& f);
void add_spec_flags(CLI::App& app, SpecFlags& f);
// Applies --numerics to the kernels.
void apply_numerics(const SpecFlags& f);

// What --draft-model loaded: a draft model (--spec draft) or a Gemma 4 assistant (--spec
// assistant); kept alive beside the drafter that uses it.
struct DraftHolder {
  std::unique_ptr<Model> model;
  std::unique_ptr<Gemma4Assistant> assistant;
};

// The drafter for --spec (nullptr for none). --spec draft without --draft-model takes the shipped
// draft when target_dir is the shipped target; --spec assistant needs --draft-model.
std::unique_ptr<Drafter> make_drafter(const SpecFlags& f, const std::string& target_dir,
                                      Model& target,
                                      const SamplingParams& sampling,
                                      DraftHolder& draft_holder);

}  // namespace lockstep::cli
