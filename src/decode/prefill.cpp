#include "decode/prefill.h"

#include "core/error.h"

namespace lockstep {

ForwardResult prefill(Model& model, SequenceState& seq, std::span<const int32_t> tokens,
                      int64_t chunk, bool all_logits) {
  if (tokens.empty()) fail("prefill: the prompt is empty (at least one token is needed)");
  const size_t step = chunk > 0 ? static_cast<size_t>(chunk) : tokens.size();
  ForwardResult last;
  for (size_t begin = 0; begin < tokens.size(); begin += step) {
    const size_t n = std::min(step, tokens.size() - begin);
    const bool final_chunk = begin + n == tokens.size();
    ForwardItem item;
    item.seq = &seq;
    item.tokens = tokens.subspan(begin, n);
    item.logits = !final_chunk ? ForwardItem::Logits::None
                  : all_logits ? ForwardItem::Logits::All
                               : ForwardItem::Logits::Last;
    last = model.forward({&item, 1});
  }
  return last;
}

}  // namespace lockstep
