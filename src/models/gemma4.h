// Gemma 4 text models (gemma4_text, and the language model of a wrapped gemma4): sliding and full
// attention layers with their own head dims and RoPE, layers that read an earlier layer's KV,
// full layers whose values are their keys, per-layer input embeddings, the MoE block beside the
// dense MLP, per-layer output scalars and final-logit soft-capping (ModelConfig::Gemma4).
#pragma once

#include <memory>
#include <string>

#include "kernels/rope_table.h"
#include "models/config.h"
#include "models/model.h"

namespace lockstep {

std::unique_ptr<Model> load_gemma4_model(const ModelConfig& config, const std::string& dir,
                                         const ModelOptions& options);

// One layer type's rotary table (transformers' Gemma4TextRotaryEmbedding): "default" rotates the
// whole head with inv_freq[i] = theta^(-2i / head_dim); "proportional" keeps those frequencies
// for the first floor(partial_rotary_factor * head_dim / 2) pairs, 0 (no rotation) for the rest,
// each divided by factor. Either way the table spans the whole head (rotary_dim = head_dim).
kernels::RopeTable gemma4_rope_table(const ModelConfig::Gemma4::Rope& rope, int64_t head_dim);

}  // namespace lockstep
