#include "decode/batch_generate.h"

#include <algorithm>

#include "decode/prefill.h"

namespace lockstep {

std::vector<GenerateResult> generate_batch(Model& model,
                                           std::span<const std::vector<int32_t>> prompts,
                                           const GenerateOptions& options) {
  const size_t n = prompts.size();
  const int64_t V = model.config().vocab_size;
  std::vector<GenerateResult> results(n);
  std::vector<std::unique_ptr<SequenceState>> seqs;
  std::vector<SequenceState*> seq_ptrs;
  std::vector<std::span<const int32_t>> spans;
  std::vector<std::vector<int32_t>> history(prompts.begin(), prompts.end());
  std::vector<Sampler> samplers;
  for (size_t i = 0; i < n; ++i) {
    seqs.push_back(model.new_sequence());
    seq_ptrs.push_back(seqs.back().get());
    spans.emplace_back(prompts[i]);
    samplers.emplace_back(options.sampling);
    results[i].finish_reason = "length";
    results[i].stats.prompt_tokens = static_cast<int64_t>(prompts[i].size());
  }
  if (n == 0 || options.max_tokens == 0) return results;
  ForwardResult out = prefill_batch(model, seq_ptrs, spans, options.prefill_chunk);
  std::vector<size_t> active(n);
  for (size_t i = 0; i < n; ++i) active[i] = i;
  while (!active.empty()) {
    std::vector<size_t> still;
    for (size_t a = 0; a < active.size(); ++a) {
      const size_t i = active[a];
      auto& h = history[i];
      const int32_t t = samplers[i].choose(
          {&out.logits[out.first_row[a] * V], static_cast<size_t>(V)},
          {h, static_cast<int64_t>(prompts[i].size())}, static_cast<int64_t>(h.size()));
      h.push_back(t);
      results[i].tokens.push_back(t);
      const bool eos =
          std::find(options.eos_ids.begin(), options.eos_ids.end(), t) != options.eos_ids.end();
      if (eos) results[i].finish_reason = "stop";
      if (!eos && static_cast<int64_t>(results[i].tokens.size()) < options.max_tokens)
        still.push_back(i);
    }
    active = std::move(still);
    if (active.empty()) break;
    std::vector<ForwardItem> items;
    for (size_t i : active)
      items.push_back({seqs[i].get(), {&history[i].back(), 1}, ForwardItem::Logits::Last});
    out = model.forward(items);
  }
  for (auto& r : results) r.stats.generated_tokens = static_cast<int64_t>(r.tokens.size());
  return results;
}

}  // namespace lockstep
