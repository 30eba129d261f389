// Rotary inverse frequencies from a model config: default, linear, llama3 and yarn scaling, with
// partial rotary (only rotary_dim of head_dim rotate). Follows transformers' rope initialisation.
#pragma once

#include "kernels/rope_table.h"
#include "models/config.h"

namespace lockstep {

kernels::RopeTable make_rope_table(const ModelConfig& config);

}  // namespace lockstep
