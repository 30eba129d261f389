// Decoding: prefill the prompt, then rounds of [last token + drafts] through the target until a
// stop condition. Without a drafter each round is one token (classic decode). Every token is
// chosen by the sampler from the logits of its own position and the exact prefix before it, so
// drafts only decide how many positions one forward computes.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "constraints/constraint.h"
#include "constraints/reasoning_budget.h"
#include "decode/speculative/drafter.h"
#include "models/model.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace lockstep {

struct GenerateOptions {
  SamplingParams sampling;
  int64_t max_tokens = 128;
  std::vector<int32_t> eos_ids;         // generation stops after emitting one (it is kept)
  std::vector<std::string> stop;        // stop strings (need `tokenizer`)
  // The text stop strings are matched in: tokenizer->decode(tokens, skip special). Not owned.
  const Tokenizer* tokenizer = nullptr;
  int64_t prefill_chunk = 0;            // 0: whole prompt in one forward
  // Speculative decoding: drafts of up to draft_width tokens verified in one target forward.
  // The output is identical to classic decode (drafter null) by construction.
  Drafter* drafter = nullptr;
  int draft_width = 0;
  // Constrained decoding: every token is chosen among those the constraint allows after the
  // exact prefix of output before it (the mask comes before penalties and filters; see
  // Sampler::choose). The output stops after one of the constraint vocabulary's EOS ids (which
  // the grammar allows once it can end), or at the grammar's end when that vocabulary has none.
  // Shared, immutable; each request keeps its own ConstraintState.
  std::shared_ptr<const constraints::Constraint> constraint;
  // A limit on the tokens inside a thinking model's reasoning block: once spent, the block's
  // close is forced token by token (constraints/reasoning_budget.h). With a constraint too, the
  // forced tokens must be ones its grammar allows (the grammars after a reasoning block do).
  // Shared, immutable; each request keeps its own state.
  std::shared_ptr<const constraints::ReasoningBudget> reasoning_budget;
  // -1: none; N >= 0: record each chosen token's log-probability under the model's raw
  // distribution and the N most likely alternatives (OpenAI logprobs).
  int top_logprobs = -1;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // most likely tokens, best first (ties: lower id)
};

struct SpecStats {
  int64_t rounds = 0, drafted = 0, accepted = 0;
  double acceptance() const { return drafted > 0 ? double(accepted) / double(drafted) : 0; }
  double mean_accepted_per_round() const { return rounds > 0 ? double(accepted) / rounds : 0; }
};

struct GenerateStats {
  int64_t prompt_tokens = 0, generated_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  double prefill_tok_s() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  // Decode rate over the tokens produced by decode forwards (the first comes from prefill).
  double decode_tok_s() const {
    return decode_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_seconds : 0;
  }
};

struct GenerateResult {
  std::vector<int32_t> tokens;
  std::string finish_reason;            // "stop" (eos or stop string) or "length"
  size_t text_limit = std::string::npos;  // with a stop string: text length before it
  GenerateStats stats;
  SpecStats spec;
  std::vector<TokenLogprob> logprobs;   // one per token when options.top_logprobs >= 0
};

// on_token is called for each token as it is chosen; returning false cancels (finish "cancelled").
GenerateResult generate(Model& model, std::span<const int32_t> prompt,
                        const GenerateOptions& options,
                        const std::function<bool(int32_t)>& on_token = {});

}  // namespace lockstep
