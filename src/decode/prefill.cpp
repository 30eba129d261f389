#include "decode/prefill.h"

#include <algorithm>

#include "core/error.h"

namespace lockstep {

ForwardItem prefill_item(SequenceState& seq, std::span<const int32_t> prompt, int64_t chunk,
                         PrefillRows rows) {
  const int64_t total = static_cast<int64_t>(prompt.size()), done = seq.length;
  if (done >= total)
    fail("prefill: the sequence already holds ", done, " of the prompt's ", total, " tokens");
  const int64_t n = chunk > 0 ? std::min(chunk, total - done) : total - done;
  const bool final_chunk = done + n == total;
  ForwardItem item;
  item.seq = &seq;
  item.tokens = prompt.subspan(done, n);
  switch (rows) {
    case PrefillRows::None:
      item.logits = ForwardItem::Logits::None;
      break;
    case PrefillRows::Last:
      item.logits = final_chunk ? ForwardItem::Logits::Last : ForwardItem::Logits::None;
      break;
    case PrefillRows::FinalChunk:
      item.logits = final_chunk ? ForwardItem::Logits::All : ForwardItem::Logits::None;
      break;
    case PrefillRows::Every:
      item.logits = ForwardItem::Logits::All;
      break;
  }
  return item;
}

ForwardResult prefill(Model& model, SequenceState& seq, std::span<const int32_t> prompt,
                      int64_t chunk, PrefillRows rows,
                      std::span<const kernels::TokenRule> final_choose) {
  if (prompt.empty()) fail("prefill: the prompt is empty (at least one token is needed)");
  ForwardResult out;
  while (seq.length < static_cast<int64_t>(prompt.size())) {
    ForwardItem item = prefill_item(seq, prompt, chunk, rows);
    const bool final_call =
        seq.length + static_cast<int64_t>(item.tokens.size()) == static_cast<int64_t>(prompt.size());
    if (final_call && !final_choose.empty()) {
      item.choose = final_choose;
      item.hidden = false;
    }
    out = model.forward({&item, 1});
  }
  return out;
}

}  // namespace lockstep
