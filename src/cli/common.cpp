#include "cli/common.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/numerics.h"
#include "tokenizer/tokenizer.h"

#ifndef LOCKSTEP_DEFAULT_MODEL_DIR
#define LOCKSTEP_DEFAULT_MODEL_DIR ""
#endif
#ifndef LOCKSTEP_DEFAULT_DRAFT_DIR
#define LOCKSTEP_DEFAULT_DRAFT_DIR ""
#endif

namespace lockstep::cli {

void add_model_flags(CLI::App& app, ModelFlags& flags, bool model_required) {
  auto* opt = app.add_option(
      "-m,--model", flags.dir,
      model_required ? "Model directory (Hugging Face layout: config.json, *.safetensors, "
                       "tokenizer.json)"
                     : "Model directory (Hugging Face layout: config.json, *.safetensors, "
                       "tokenizer.json); default: $LOCKSTEP_MODEL, else the shipped "
                       "models/lockstep-code-16m (Qwen3.5 architecture with MTP head)");
  if (model_required) opt->required();
  app.add_option("--threads", flags.threads, "CPU threads (default: all cores); never changes output")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ctx-size", flags.ctx_size,
                 "KV cache capacity in tokens (default: min(model context, 4096))")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--quantize", flags.quantize,
                 "Quantize float weights at load: 4 or 8 bits (group-wise affine, MLX layout)")
      ->check(CLI::IsMember({4, 8}));
  app.add_option("--quantize-group-size", flags.quantize_group_size,
                 "Weights per scale/bias group for --quantize (multiple of 16; default 64)");
  app.add_option("--quant-dot", flags.quant_dot,
                 "CPU dot product of 4/8-bit weights: int8 (activations quantized to int8 per "
                 "weight group, exact integer sums) or float (weights dequantized exactly, float "
                 "activations); either keeps the output independent of batching and speculation. "
                 "Default: " + std::string(kernels::quant_dot_name(kernels::kDefaultQuantDot)))
      ->check(CLI::IsMember({"float", "int8"}));
  app.add_option("--device", flags.device,
                 "Where the model runs: cpu (default) or cuda (NVIDIA GPU, Hopper: every "
                 "supported family; the same tokens as alone, batched or speculated)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--tensor-parallel,--tensor-parallel-size", flags.tensor_parallel,
                 "GPUs to split the model over (default 1). Only 1 runs today: the transport "
                 "between GPUs is not built (docs/design-notes.md, \"Tensor parallelism across "
                 "GPUs\")")
      ->check(CLI::Range(1, 1024));
}

namespace {
// --tensor-parallel N > 1 is refused before any weight is read, naming what is and is not built.
void check_tensor_parallel(const ModelFlags& flags) {
  if (flags.tensor_parallel == 1) return;
  if (kernels::parse_device(flags.device) != kernels::Device::Cuda)
    fail("--tensor-parallel ", flags.tensor_parallel,
         ": tensor parallelism splits a model over GPUs; it applies to --device cuda only");
  fail("--tensor-parallel ", flags.tensor_parallel,
       ": splitting a model over several GPUs is not built yet; one process runs a model on one "
       "GPU. The arithmetic that gives every GPU count the same tokens is built and tested on one "
       "GPU (docs/design-notes.md, \"Tensor parallelism across GPUs\"); the transport between "
       "GPUs is not. Run with --tensor-parallel 1 (the default).");
}
}  // namespace

std::string resolve_model_dir(const ModelFlags& flags) {
  if (!flags.dir.empty()) return flags.dir;
  if (const char* env = std::getenv("LOCKSTEP_MODEL"); env && *env) return env;
  const std::string builtin = LOCKSTEP_DEFAULT_MODEL_DIR;
  if (!builtin.empty() && std::filesystem::exists(builtin + "/config.json")) return builtin;
  fail("no model given and the shipped model is missing: pass -m DIR (a Hugging Face checkpoint "
       "directory)");
}

std::unique_ptr<Model> load_model_from_flags(const ModelFlags& flags, int64_t needed_tokens) {
  check_tensor_parallel(flags);
  ThreadPool::set_default_threads(flags.threads);
  kernels::set_quant_dot(flags.quant_dot.empty() ? kernels::kDefaultQuantDot
                                                 : kernels::parse_quant_dot(flags.quant_dot.c_str()));
  const std::string dir = resolve_model_dir(flags);
  const ModelConfig config = load_model_config(dir);
  ModelOptions options;
  int64_t ctx = flags.ctx_size;
  if (ctx == 0) {
    ctx = 4096;
    if (config.max_position_embeddings > 0) ctx = std::min(ctx, config.max_position_embeddings);
    ctx = std::max(ctx, needed_tokens);
  }
  options.kv_capacity_tokens = ctx;
  options.quantize_bits = flags.quantize;
  options.quantize_group_size = flags.quantize_group_size;
  options.device = kernels::parse_device(flags.device);
  return load_model(dir, options);
}

std::unique_ptr<Model> load_draft_model(const std::string& dir, const Model& target,
                                        int64_t kv_capacity) {
  ModelOptions o;
  o.kv_capacity_tokens = kv_capacity;
  o.device = target.device();  // the draft runs beside its target
  std::unique_ptr<Model> draft = load_model(dir, o);
  if (draft->config().vocab_size != target.config().vocab_size)
    fail("--draft-model ", dir, ": vocabulary of ", draft->config().vocab_size,
         " tokens, the target's has ", target.config().vocab_size,
         " (draft and target must share one tokenizer and vocabulary size)");
  return draft;
}

std::string default_draft_dir(const std::string& target_dir) {
  const std::string builtin = LOCKSTEP_DEFAULT_MODEL_DIR, draft = LOCKSTEP_DEFAULT_DRAFT_DIR;
  // error_code forms: a target or built-in path that does not exist (a binary carried to another
  // machine) means "not the shipped target", never a filesystem exception.
  std::error_code ec;
  if (!builtin.empty() && !target_dir.empty() && std::filesystem::exists(draft + "/config.json", ec) &&
      std::filesystem::equivalent(std::filesystem::path(target_dir), builtin, ec) && !ec)
    return draft;
  return "";
}

std::vector<int32_t> parse_id_list(const std::string& text, const std::string& flag) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    std::string item = text.substr(i, j - i);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) fail(flag, ": empty element in id list \"", text, "\"");
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > INT32_MAX)
      fail(flag, ": \"", item, "\" is not a token id (expected a non-negative integer)");
    ids.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  if (ids.empty()) fail(flag, ": no ids given");
  return ids;
}

std::vector<int32_t> eos_ids_for(const ModelConfig& config, const Tokenizer* tokenizer) {
  std::vector<int32_t> ids = config.eos_token_ids;
  if (tokenizer)
    for (int32_t id : tokenizer->eos_ids())
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  return ids;
}

void add_sampling_flags(CLI::App& app, SamplingParams& s) {
  app.add_option("--temp,--temperature", s.temperature, "Temperature (0: greedy, default)");
  app.add_option("--seed", s.seed, "Seed for sampling; same seed, same text");
  app.add_option("--top-k", s.top_k, "Keep the k most likely tokens (0: off)");
  app.add_option("--top-p", s.top_p, "Nucleus sampling mass (1: off)");
  app.add_option("--min-p", s.min_p, "Drop tokens below min-p x top probability (0: off)");
  app.add_option("--repeat-penalty", s.repetition_penalty, "Repetition penalty (1: off)");
  app.add_option("--presence-penalty", s.presence_penalty, "Presence penalty (0: off)");
  app.add_option("--frequency-penalty", s.frequency_penalty, "Frequency penalty (0: off)");
}

std::unique_ptr<Tokenizer> load_tokenizer_if_present(const std::string& dir) {
  if (!has_tokenizer(dir)) return nullptr;
  return Tokenizer::load(dir);
}

}  // namespace lockstep::cli
