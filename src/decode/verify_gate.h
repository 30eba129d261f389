// The generation gate (`lockstep verify`): the contract measured end to end. For each prompt and
// temperature it runs classic decode alone with the prompt whole (the baseline), then the same
// request prefilled in chunks, batched beside every other prompt, and under every speculative
// mode and width, and compares whole generations token by token.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "decode/generate.h"
#include "models/gemma4_assistant.h"

namespace lockstep {

struct GateConfig {
  std::vector<std::vector<int32_t>> prompts;
  int64_t max_tokens = 128;
  std::vector<int32_t> eos_ids;
  std::vector<float> temperatures = {0.0f, 0.8f};
  uint64_t seed = 1234;               // for temperatures > 0
  int64_t prefill_chunk = 5;          // the chunked-prefill case
  std::vector<int> lookup_widths = {1, 2, 3, 4, 8};
  std::vector<int> draft_widths = {1, 2, 3, 4};
  std::vector<int> mtp_widths = {1, 2, 3, 4};    // when the model has an MTP head
  Model* draft_model = nullptr;       // adds draft/wK cases
  std::vector<int> assistant_widths = {1, 2, 3, 4};
  Gemma4Assistant* assistant = nullptr;  // adds assistant/wK cases (loaded for the gated model)
  // Every case, the baseline included, decodes under this constraint (each with its own state).
  std::shared_ptr<const constraints::Constraint> constraint;
  // Every case decodes under this reasoning budget too (GenerateOptions::reasoning_budget).
  std::shared_ptr<const constraints::ReasoningBudget> reasoning_budget;
};

struct GateCase {
  std::string mode;        // classic-chunked, batched, lookup/w3, draft/w2, ...
  size_t prompt = 0;
  float temperature = 0;
  bool identical = true;
  int64_t first_diff = -1;            // first differing generated position
  int32_t expected = -1, got = -1;    // tokens there (-1: one generation ended)
  SpecStats spec;
  double seconds = 0;
  int64_t tokens = 0;
};

struct GateReport {
  std::vector<GateCase> cases;
  // With a constraint: each baseline generation (prompt x temperature) replayed against it
  // (check_constraint): complete sentences, prefixes cut by max_tokens, and invalid ones (a bug).
  size_t constraint_complete = 0, constraint_incomplete = 0, constraint_invalid = 0;
  size_t identical() const;
  size_t diverged() const;
};

GateReport run_gate(Model& model, const GateConfig& config,
                    const std::function<void(const GateCase&)>& on_case = {});

}  // namespace lockstep
