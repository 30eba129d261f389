// Gemma 3 text models (gemma3_text, and the language model of a wrapped gemma3): sliding-window
// and global attention layers by layer_types, each kind with its own RoPE, q/k norm, Gemma's four
// zero-centred norms per layer, the sqrt(hidden) embedding scale, a gelu_pytorch_tanh MLP and
// optional final-logit soft-capping.
#pragma once

#include <memory>
#include <string>

#include "models/model.h"

namespace lockstep {

std::unique_ptr<Model> load_gemma3_model(const ModelConfig& config, const std::string& dir,
                                         const ModelOptions& options);

}  // namespace lockstep
