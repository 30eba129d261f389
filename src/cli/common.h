// Helpers shared by the subcommands: model loading with the common flags, id lists, tokenizer
// access, the default (shipped) model location.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "sampling/sampler.h"

namespace lockstep {
class Tokenizer;
}

namespace lockstep::cli {

struct ModelFlags {
  std::string dir;
  int threads = 0;         // 0: all available cores
  int64_t ctx_size = 0;    // 0: min(model context, 4096)
  int quantize = 0;        // --quantize: 4 or 8 bits at load time (0: as stored)
  int64_t quantize_group_size = 64;
  std::string device = "cpu";  // --device: cpu or cuda
  std::string quant_dot;       // --quant-dot: float or int8 ("": the CPU default)
  int tensor_parallel = 1;     // --tensor-parallel: GPUs one model is split over (1: one GPU)
};

// Adds -m/--model, --threads, --ctx-size, --quantize, --quant-dot, --device, --tensor-parallel. When the model is optional, -m defaults to the
// shipped model (models/ next to the binary's source tree, or $LOCKSTEP_MODEL).
void add_model_flags(CLI::App& app, ModelFlags& flags, bool model_required);

// The directory -m resolved to (the shipped default when -m was not given).
std::string resolve_model_dir(const ModelFlags& flags);

// Sets the global thread pool size from --threads and the CPU quant dot from --quant-dot, and
// loads the model.
std::unique_ptr<Model> load_model_from_flags(const ModelFlags& flags, int64_t needed_tokens = 0);

// Loads the draft model in `dir` beside `target` (same device, `kv_capacity` tokens of KV) and
// checks that both have one vocabulary (every token either produces, the other must accept).
std::unique_ptr<Model> load_draft_model(const std::string& dir, const Model& target,
                                        int64_t kv_capacity);

// The shipped draft model when `target_dir` is the shipped target (else "").
std::string default_draft_dir(const std::string& target_dir);

// Parses "1,2,3" (spaces allowed); errors name the flag and the bad element.
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& flag);

// End-of-sequence ids: config.json / generation_config.json's, then the tokenizer's. generate,
// chat and serve all take them from here, so a request stops at the same token everywhere.
std::vector<int32_t> eos_ids_for(const ModelConfig& config, const Tokenizer* tokenizer);

// --temp, --seed, --top-k, --top-p, --min-p and the three penalties.
void add_sampling_flags(CLI::App& app, SamplingParams& sampling);

// The tokenizer of `dir`, or nullptr when it has no tokenizer.json.
std::unique_ptr<Tokenizer> load_tokenizer_if_present(const std::string& dir);

}  // namespace lockstep::cli
