// Choosing a token from one position's logits (../shared/DESIGN.md, "Sampling").
//
// The choice at absolute position p is a pure function of (that position's logits, the exact
// token prefix before p, the parameters, the seed, p). Greedy takes the lowest id among maxima.
// Random sampling is Gumbel-max: argmax over surviving tokens of logit/T + G(seed, p, id), where G
// is Gumbel noise from a counter-based generator. No state is carried between positions, so a
// token drafted and verified at p is chosen exactly as classic decode would choose it at p.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "constraints/token_mask.h"
#include "kernels/token_choice.h"

namespace lockstep {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  uint64_t seed = 0;
  int32_t top_k = 0;          // 0: off
  float top_p = 1.0f;         // 1: off
  float min_p = 0.0f;         // 0: off
  float repetition_penalty = 1.0f;  // over prompt and output (Hugging Face semantics)
  float presence_penalty = 0.0f;    // over output tokens (OpenAI semantics)
  float frequency_penalty = 0.0f;   // over output tokens
  // Added to the logits of these ids before anything else sees them (OpenAI's logit_bias):
  // ascending unique ids, each bias in [-100, 100]. A row with a bias is chosen on the host by
  // choose() (the backend's rule() carries none; the decoder routes such rows to the host), so
  // the choice is the same function of the logits in every batch and speculative mode.
  std::vector<std::pair<int32_t, float>> logit_bias;

  bool greedy() const { return temperature <= 0.0f; }
  bool has_logit_bias() const { return !logit_bias.empty(); }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
  // Throws lockstep::Error naming the parameter when out of range.
  void validate() const;
};

// The sequence so far: `tokens` are all tokens before the position being chosen; the first
// `prompt_len` of them are the prompt.
struct TokenHistory {
  std::span<const int32_t> tokens;
  int64_t prompt_len = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplingParams params) : params_(params) { params_.validate(); }
  const SamplingParams& params() const { return params_; }

  // The token at absolute position `position` (== history.tokens.size()); logit_bias applies.
  int32_t choose(std::span<const float> logits, const TokenHistory& history, int64_t position);

  // The same choice among the tokens `allowed` permits (a constraint's mask at this position).
  // The mask comes first: disallowed ids (and ids past allowed.size()) become -infinity, then
  // penalties, temperature, top-k / top-p / min-p and Gumbel-max see only the surviving tokens,
  // as in llama.cpp and vLLM. So top_k = 1 is the best allowed token, and top-p's mass is the
  // allowed tokens' renormalised distribution. `allowed` must permit at least one id < V.
  int32_t choose(std::span<const float> logits, const TokenHistory& history, int64_t position,
                 const constraints::TokenMask& allowed);

  // The same choice as a rule a backend applies on its own copy of the logits
  // (Backend::choose_tokens): kernels::choose_token(logits, rule(...)) is choose() for params
  // without logit_bias (which the rule does not carry). `adjust`
  // receives the penalties' sparse list, which the rule points into: keep it alive and unchanged
  // while the rule is used. V: the vocabulary (the logits row's length).
  kernels::TokenRule rule(const TokenHistory& history, int64_t position, int64_t V,
                          std::vector<kernels::TokenAdjust>& adjust) const;

 private:
  SamplingParams params_;
  std::vector<kernels::TokenAdjust> adjust_;
  kernels::ChoiceScratch scratch_;
  std::vector<float> masked_;  // the masked copy of a row
  std::vector<float> biased_;  // the logit_bias copy of a row
};

// Uniform (0, 1) from a counter-based hash of (seed, position, id): no sequential state.
inline float position_uniform(uint64_t seed, int64_t position, int32_t id) {
  return kernels::choice::position_uniform(seed, position, id);
}

}  // namespace lockstep
