// The config of a Gemma 4 assistant drafter (model_type gemma4_assistant,
// Gemma4AssistantForCausalLM; the "-it-assistant" checkpoints Google publishes beside each Gemma 4
// target): a small Gemma 4 text stack whose every layer reads its target's KV cache, with the
// projections between it and the target's hidden size. Every field that changes the math is read
// here or refused naming it (transformers 5.17's Gemma4AssistantConfig and its validation).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/checkpoint_layout.h"
#include "models/config.h"

namespace lockstep {

struct Gemma4AssistantConfig {
  std::string source;  // config.json path
  // The text stack (text_config): Gemma 4 layers without k/v (each attends to the target's KV of
  // its layer type), no per-layer inputs, no MoE block, no double-wide MLP. gemma4.kv_source is
  // -1 for every layer.
  ModelConfig text;
  int64_t backbone_hidden_size = 0;  // the target's hidden size it was trained with
  // Logits from a centroid-masked embedder (masked_embedding.*) instead of all of lm_head.
  bool use_ordered_embeddings = false;
  int64_t num_centroids = 0, centroid_top_k = 0;
  bool tie_word_embeddings = true;  // lm_head is model.embed_tokens
};

// True when <dir>/config.json says model_type gemma4_assistant.
bool is_gemma4_assistant_dir(const std::string& dir);
Gemma4AssistantConfig parse_gemma4_assistant_config(const std::string& json_text,
                                                    const std::string& source);
Gemma4AssistantConfig load_gemma4_assistant_config(const std::string& dir);

// Every tensor of the checkpoint as transformers saves it (make-random writes this list). The
// ordered embedder's token_ordering (an integer permutation) has no random form: refused.
std::vector<LayoutTensor> gemma4_assistant_layout(const Gemma4AssistantConfig& c, DType dtype);

}  // namespace lockstep
