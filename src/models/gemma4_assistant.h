// The Gemma 4 assistant drafter (transformers' Gemma4AssistantForCausalLM), a model that runs
// only beside its target. One draft step for a target sequence of n tokens whose next token x
// (position n) is chosen but not yet run:
//   e = target_embed(x) * target_embed_scale            (the target's scaled input embedding)
//   y = pre_projection([e | h])   h: the target's final-normed hidden at n - 1, or the previous
//                                    step's output
//   per layer: Gemma 4 decoder layer whose attention computes only queries (q_proj, q_norm, RoPE
//     at position n) and attends to the TARGET's cache of the layer's kind: the full layers to
//     the KV of the target's last full layer with its own KV, positions [0, n); the sliding
//     layers to its last sliding layer's, the last sliding_window + 1 of them (transformers'
//     inclusive bidirectional window, flipped). Scores unscaled.
//   z = norm(y);  next hidden = post_projection(z);  logits = lm_head(z) (no soft-cap), or with
//     use_ordered_embeddings the centroid-masked embedder: the tokens of the top-k centroids of
//     centroids(z) keep their lm_head logits, every other token gets (their minimum - 1).
// Every step of a round runs at position n against the same keys; only x and h change. The
// target's cache is only read: nothing the assistant does can change a later target token.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "models/gemma4_assistant_config.h"
#include "models/model.h"

namespace lockstep {

class Gemma4Assistant {
 public:
  virtual ~Gemma4Assistant() = default;
  virtual const Gemma4AssistantConfig& config() const = 0;

  struct Step {
    const SequenceState* target = nullptr;  // its cache [0, target->length) is read
    int32_t token = 0;                       // x, at position target->length
    std::span<const float> hidden;           // h [backbone_hidden_size]
  };
  // One output row per step: logits [vocab] and next hidden [backbone_hidden_size].
  virtual ForwardResult draft(std::span<const Step> steps) = 0;
};

// Loads the assistant in `dir` into the target's backend. The target must lend its KV (a Gemma 4
// model) and match: vocab_size, backbone_hidden_size = its hidden size, and per layer kind the
// head_dim, KV heads and sliding_window of the target layer whose cache it reads; each mismatch
// is an Error naming the field.
std::unique_ptr<Gemma4Assistant> load_gemma4_assistant(const std::string& dir,
                                                       const Model& target);

}  // namespace lockstep
