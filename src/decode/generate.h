// Classic decode: prefill the prompt, then one token per forward until a stop condition.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/model.h"
#include "sampling/sampler.h"

namespace lockstep {

struct GenerateOptions {
  SamplingParams sampling;
  int64_t max_tokens = 128;
  std::vector<int32_t> eos_ids;         // generation stops after emitting one (it is kept)
  std::vector<std::string> stop;        // stop strings (need `detokenize`)
  std::function<std::string(std::span<const int32_t>)> detokenize;
  int64_t prefill_chunk = 0;            // 0: whole prompt in one forward
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
};

// on_token is called for each token as it is chosen; returning false cancels (finish "cancelled").
GenerateResult generate(Model& model, std::span<const int32_t> prompt,
                        const GenerateOptions& options,
                        const std::function<bool(int32_t)>& on_token = {});

}  // namespace lockstep
