// What the Gemma families (models/gemma3.cpp, models/gemma4.cpp) share: where a wrapped
// checkpoint keeps its language model's tensors, and the embedding scale as transformers applies
// it.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "io/safetensors.h"
#include "models/config.h"

namespace lockstep {

// sqrt(n) as transformers' scaled embeddings apply it: rounded to float32 (a torch buffer), then
// to the embedding's dtype (BF16 checkpoints compute with 55.5, not 55.4256, for hidden 3072),
// the dtype the model runs in when loaded as published.
float gemma_embed_scale(int64_t n, DType embedding_dtype);

// The dtype whose rounding of the embedding scale transformers applies to table `name`: its own,
// or for an MLX-quantized table the dtype of its scales (what the model computes in).
DType gemma_embedding_dtype(const Checkpoint& ckpt, const std::string& name);

// Where the language model's tensors are: a flat *_text checkpoint has <weight_prefix>* and
// lm_head.weight; a wrapped one either the published language_model.model.* with
// language_model.lm_head.weight (Gemma 3; what transformers 5.17 still saves for it) or
// transformers' module names model.language_model.* with lm_head.weight (Gemma 4), whichever
// holds embed_tokens.
struct GemmaNames {
  std::string prefix, lm_head;
};
GemmaNames gemma_tensor_names(const Checkpoint& ckpt, const ModelConfig& c);

}  // namespace lockstep
