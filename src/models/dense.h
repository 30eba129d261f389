// Dense decoder-only transformers: llama, qwen2 (q/k/v biases), qwen3 (q/k RMSNorm before RoPE).
#pragma once

#include <memory>
#include <string>

#include "models/model.h"

namespace lockstep {

std::unique_ptr<Model> load_dense_model(const ModelConfig& config, const std::string& dir,
                                        const ModelOptions& options);

}  // namespace lockstep
