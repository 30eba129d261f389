// --json-schema, --grammar, --regex and --json-object: the constrained-decoding flags shared by
// generate, verify and bench (docs/constraints.md).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "constraints/constraint.h"
#include "models/model.h"

namespace lockstep {
class Tokenizer;
}

namespace lockstep::cli {

struct ConstraintFlags {
  std::string json_schema;  // inline JSON or a file holding it
  std::string grammar;      // a GBNF file
  std::string regex;
  bool json_object = false;
  bool given() const {
    return !json_schema.empty() || !grammar.empty() || !regex.empty() || json_object;
  }
};

void add_constraint_flags(CLI::App& app, ConstraintFlags& flags);

// The compiled constraint the flags ask for (nullptr when none). Needs the model's tokenizer
// (token bytes). `eos_ids` end the output (the model's EOS ids), and with `with_end_of_turn` the
// chat template's end-of-turn tokens too. Errors name the flag: "--json-schema: json schema at
// /properties/x: unsupported keyword 'not'".
std::shared_ptr<const constraints::Constraint> compile_constraint_flags(
    const ConstraintFlags& flags, const Tokenizer* tokenizer, const ModelConfig& config,
    std::vector<int32_t> eos_ids, bool with_end_of_turn);

}  // namespace lockstep::cli
