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
  std::string spec = "none";   // none | lookup | draft | mtp
  int draft_width = 0;         // 0: the mode's default
  std::string draft_model;
  std::string numerics = "exact";
};

void add_numerics_flag(CLI::App& app, SpecFlags& f);
void add_spec_flags(CLI::App& app, SpecFlags& f);
// Applies --numerics to the kernels.
void apply_numerics(const SpecFlags& f);

// The drafter for --spec (nullptr for none). `draft_holder` keeps a loaded draft model alive;
// --spec draft without --draft-model takes the shipped draft when target_dir is the shipped target.
std::unique_ptr<Drafter> make_drafter(const SpecFlags& f, const std::string& target_dir,
                                      Model& target,
                                      const SamplingParams& sampling,
                                      std::unique_ptr<Model>& draft_holder);

}  // namespace lockstep::cli
