#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>

#include "constraints/constraint.h"
#include "core/error.h"

namespace lockstep {

void SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || temperature > 100.0f)
    fail("temperature must be in [0, 100], got ", temperature);
  if (top_k < 0) fail("top_k must be >= 0, got ", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top_p must be in (0, 1], got ", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("min_p must be in [0, 1], got ", min_p);
  if (!(repetition_penalty > 0.0f)) fail("repetition_penalty must be > 0, got ", repetition_penalty);
  if (!(std::fabs(presence_penalty) <= 2.0f))
    fail("presence_penalty must be in [-2, 2], got ", presence_penalty);
  if (!(std::fabs(frequency_penalty) <= 2.0f))
    fail("frequency_penalty must be in [-2, 2], got ", frequency_penalty);
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto& [id, bias] = logit_bias[i];
    if (id < 0) fail("logit_bias: token id ", id, " is negative");
    if (i > 0 && id <= logit_bias[i - 1].first) fail("logit_bias: ids must be ascending and unique");
    if (!(std::fabs(bias) <= 100.0f)) fail("logit_bias: the bias of token ", id, " must be in [-100, 100], got ", bias);
  }
}

kernels::TokenRule Sampler::rule(const TokenHistory& history, int64_t position, int64_t V,
                                 std::vector<kernels::TokenAdjust>& adjust) const {
  const SamplingParams& p = params_;
  kernels::TokenRule r;
  r.temperature = p.temperature;
  r.seed = p.seed;
  r.position = position;
  r.top_k = p.top_k;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.repetition_penalty = p.repetition_penalty;
  r.presence_penalty = p.presence_penalty;
  r.frequency_penalty = p.frequency_penalty;
  adjust.clear();
  if (p.has_penalties()) {
    // Every in-vocabulary history token as (id, 1 if in the output), sorted by id, then one
    // entry per id: seen (the repetition penalty's set) and its count in the output.
    std::vector<std::pair<int32_t, int32_t>> all;
    all.reserve(history.tokens.size());
    for (size_t i = 0; i < history.tokens.size(); ++i) {
      const int32_t t = history.tokens[i];
      if (t >= 0 && t < V)
        all.push_back({t, static_cast<int64_t>(i) >= history.prompt_len ? 1 : 0});
    }
    std::sort(all.begin(), all.end());
    for (size_t i = 0; i < all.size();) {
      kernels::TokenAdjust a;
      a.id = all[i].first;
      a.seen = 1;
      for (; i < all.size() && all[i].first == a.id; ++i) a.output_count += all[i].second;
      adjust.push_back(a);
    }
  }
  r.adjust = adjust;
  return r;
}

int32_t Sampler::choose(std::span<const float> logits, const TokenHistory& history,
                        int64_t position) {
  if (params_.has_logit_bias()) {
    // Before penalties and temperature, as OpenAI and vLLM apply it; after a constraint's mask
    // (-inf stays -inf), since the masked row is what reaches here.
    biased_.assign(logits.begin(), logits.end());
    for (const auto& [id, bias] : params_.logit_bias)
      if (static_cast<size_t>(id) < biased_.size()) biased_[static_cast<size_t>(id)] += bias;
    logits = biased_;
  }
  const kernels::TokenRule r =
      rule(history, position, static_cast<int64_t>(logits.size()), adjust_);
  return kernels::choose_token(logits, r, scratch_);
}

int32_t Sampler::choose(std::span<const float> logits, const TokenHistory& history,
                        int64_t position, const constraints::TokenMask& allowed) {
  masked_.assign(logits.begin(), logits.end());
  constraints::apply_mask(masked_, allowed);
  const int32_t token = choose(masked_, history, position);
  // Only reachable when every allowed logit is -inf or NaN (a broken model row): refuse rather
  // than emit a token the constraint forbids.
  if (!allowed.test(token))
    fail("constrained sampling: no allowed token has a finite logit at position ", position);
  return token;
}

}  // namespace lockstep
