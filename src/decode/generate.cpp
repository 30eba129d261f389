#include "decode/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "decode/prefill.h"

namespace lockstep {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Position of the earliest stop string in `text`, or npos.
size_t find_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t best = std::string::npos;
  for (const auto& s : stops)
    if (!s.empty()) best = std::min(best, text.find(s));
  return best;
}
}  // namespace

GenerateResult generate(Model& model, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const std::function<bool(int32_t)>& on_token) {
  if (options.max_tokens < 0) fail("max tokens must be >= 0, got ", options.max_tokens);
  if (!options.stop.empty() && !options.detokenize)
    fail("stop strings need a tokenizer (the model directory has no tokenizer.json)");
  Sampler sampler(options.sampling);
  GenerateResult r;
  r.stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  r.finish_reason = "length";
  if (options.max_tokens == 0) return r;

  auto seq = model.new_sequence();
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  const int64_t V = model.config().vocab_size;

  auto t0 = std::chrono::steady_clock::now();
  ForwardResult out = prefill(model, *seq, prompt, options.prefill_chunk);
  r.stats.prefill_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();

  for (;;) {
    const int64_t position = static_cast<int64_t>(history.size());
    const int32_t token = sampler.choose({out.logits.data(), static_cast<size_t>(V)},
                                         {history, static_cast<int64_t>(prompt.size())}, position);
    history.push_back(token);
    r.tokens.push_back(token);
    if (on_token && !on_token(token)) {
      r.finish_reason = "cancelled";
      break;
    }
    if (std::find(options.eos_ids.begin(), options.eos_ids.end(), token) != options.eos_ids.end()) {
      r.finish_reason = "stop";
      break;
    }
    if (!options.stop.empty()) {
      const size_t at = find_stop(options.detokenize(r.tokens), options.stop);
      if (at != std::string::npos) {
        r.finish_reason = "stop";
        r.text_limit = at;
        break;
      }
    }
    if (static_cast<int64_t>(r.tokens.size()) >= options.max_tokens) break;
    ForwardItem item;
    item.seq = seq.get();
    item.tokens = {&history.back(), 1};
    out = model.forward({&item, 1});
  }
  r.stats.generated_tokens = static_cast<int64_t>(r.tokens.size());
  r.stats.decode_seconds = seconds_since(t0);
  return r;
}

}  // namespace lockstep
