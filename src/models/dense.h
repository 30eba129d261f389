// Decoder-only transformers with the same attention in every layer: llama, mistral (llama with an
// optional sliding window), qwen2 (q/k/v biases), qwen3 (q/k RMSNorm before RoPE) and qwen3_moe
// (qwen3 with routed experts as the feed-forward block).
#pragma once

#include <memory>
#include <string>

#include "models/model.h"

namespace lockstep {

std::unique_ptr<Model> load_dense_model(const ModelConfig& config, const std::string& dir,
                                        const ModelOptions& options);

}  // namespace lockstep
