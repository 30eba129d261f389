#include "decode/prefill.h"

#include <algorithm>

#include "core/error.h"

namespace lockstep {

ForwardResult prefill_batch(Model& model, std::span<SequenceState* const> seqs,
                            std::span<const std::span<const int32_t>> prompts, int64_t chunk,
                            bool all_logits) {
  if (seqs.size() != prompts.size()) fail("prefill: sequences and prompts differ in number");
  size_t longest = 0;
  for (const auto& p : prompts) {
    if (p.empty()) fail("prefill: a prompt is empty (at least one token is needed)");
    longest = std::max(longest, p.size());
  }
  const size_t step = chunk > 0 ? static_cast<size_t>(chunk) : longest;
  // Every sequence's final chunk must land in the returned call, so each sequence starts its
  // chunks aligned to end with the longest one (the chunk boundaries never change results).
  const size_t rounds = (longest + step - 1) / step;
  ForwardResult last;
  for (size_t r = 0; r < rounds; ++r) {
    std::vector<ForwardItem> items;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const size_t n = prompts[i].size();
      const size_t my_rounds = (n + step - 1) / step, skip = rounds - my_rounds;
      if (r < skip) continue;
      const size_t begin = (r - skip) * step, len = std::min(step, n - begin);
      ForwardItem item;
      item.seq = seqs[i];
      item.tokens = prompts[i].subspan(begin, len);
      const bool final_chunk = begin + len == n;
      item.logits = !final_chunk ? ForwardItem::Logits::None
                    : all_logits ? ForwardItem::Logits::All
                                 : ForwardItem::Logits::Last;
      items.push_back(item);
    }
    last = model.forward(items);
  }
  return last;
}

ForwardResult prefill(Model& model, SequenceState& seq, std::span<const int32_t> tokens,
                      int64_t chunk, bool all_logits) {
  SequenceState* s = &seq;
  return prefill_batch(model, {&s, 1}, {&tokens, 1}, chunk, all_logits);
}

}  // namespace lockstep
