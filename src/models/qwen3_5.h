// Qwen3.5 (qwen3_5_text, and the multimodal qwen3_5 wrapper's text model) and Qwen3-Next
// (qwen3_next, dense MLP only): hybrids of Gated DeltaNet linear-attention layers and gated
// full-attention layers, with an optional MTP head (Model::mtp()).
#pragma once

#include <memory>
#include <string>

#include "models/model.h"

namespace lockstep {

std::unique_ptr<Model> load_qwen3_5_model(const ModelConfig& config, const std::string& dir,
                                          const ModelOptions& options);

}  // namespace lockstep
