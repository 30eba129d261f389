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

// The embedding scale as transformers applies it: sqrt(hidden) rounded to float32 (a torch
// buffer), then to the embedding's dtype (BF16 checkpoints compute with 55.5, not 55.4256, for
// hidden 3072), the dtype the model runs in when loaded as published.
float gemma3_embed_scale(int64_t hidden, DType embedding_dtype);

}  // namespace lockstep
