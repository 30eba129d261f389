// Random checkpoints with real architectures' shapes (`lockstep make-random`), so speed can be
// measured at real sizes and tests can run without downloading anything. Values are drawn from a
// counter-based generator keyed by (seed, tensor name, element index): the same seed gives the
// same bytes whatever the chunking or thread count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace lockstep {

// Names accepted by --like: qwen3-0.6b, qwen3-1.7b, qwen3-8b, llama-3.2-1b, qwen3.5-0.8b, the
// mixtures of experts qwen3-30b-a3b, qwen3.5-35b-a3b, qwen3-next-80b-a3b, the Gemma 3 text
// models gemma-3-1b, gemma-3-4b, gemma-3-27b, the Gemma 4 text models gemma-4-e2b, gemma-4-e4b,
// gemma-4-31b, gemma-4-26b-a4b, mistral-7b-v0.3, and the test presets tiny-llama, tiny-qwen3,
// tiny-qwen3.5, tiny-qwen3-moe, tiny-qwen3.5-moe, tiny-gemma3, tiny-gemma3-vocab (Gemma 3's
// 262144-token vocabulary, so its tokenizer and chat template can drive it), tiny-gemma4,
// tiny-gemma4-moe, tiny-mistral; small-gemma3, small-gemma4, small-gemma4-moe, small-mistral are
// sliding-window test presets at shapes the CUDA kernels take (head_dim 64 / 128, widths that
// are multiples of 16), for the GPU gates; tiny-gemma4-assistant and small-gemma4-assistant are
// Gemma 4 assistant drafters (gemma4_assistant) for tiny-gemma4 and small-gemma4.
std::vector<std::string> random_checkpoint_presets();

// The config.json text of a preset (torch_dtype set from `dtype`; layers > 0 keeps only the first
// `layers` layers, so a large model's shapes fit a small machine); an Error for unknown names.
std::string preset_config_json(const std::string& like, DType dtype, int64_t layers = 0);

struct RandomCheckpointOptions {
  std::string like;
  std::string out_dir;
  DType dtype = DType::BF16;
  uint64_t seed = 0;
  int64_t layers = 0;     // > 0: only the first `layers` decoder layers (preset_config_json)
  int threads = 0;        // 0: all available cores
  bool progress = true;   // progress lines on stderr for large checkpoints
};

struct RandomCheckpointSummary {
  size_t tensors = 0;
  int64_t parameters = 0;
  size_t bytes = 0;
};

// Writes <out_dir>/config.json and <out_dir>/model.safetensors (created if needed), streaming
// the data in chunks so memory stays small however large the model.
RandomCheckpointSummary make_random_checkpoint(const RandomCheckpointOptions& options);

}  // namespace lockstep
