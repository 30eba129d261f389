#include "models/forward_common.h"

#include <cstring>
#include <set>

#include "core/error.h"

namespace lockstep {

FlatBatch flatten_batch(std::span<const ForwardItem> items, KvPool& pool,
                        const kernels::RopeTable& rope, int64_t max_positions) {
  FlatBatch b;
  std::set<const SequenceState*> seen;
  for (const ForwardItem& it : items) {
    if (!it.seq) fail("forward: an item has no sequence");
    if (!seen.insert(it.seq).second) fail("forward: two items name the same sequence");
    if (it.tokens.empty()) fail("forward: an item has no tokens");
    const int64_t end = it.seq->length + static_cast<int64_t>(it.tokens.size());
    if (max_positions > 0 && end > max_positions)
      fail("sequence of ", end, " tokens exceeds the model's context of ", max_positions);
    pool.reserve(it.seq->kv_blocks, end);
  }
  for (const ForwardItem& it : items) {
    b.item_first.push_back(static_cast<int64_t>(b.tokens.size()));
    for (size_t i = 0; i < it.tokens.size(); ++i) {
      const int64_t pos = it.seq->length + static_cast<int64_t>(i);
      b.tokens.push_back(it.tokens[i]);
      b.rows.positions.push_back(pos);
      b.rows.blocks.push_back(&it.seq->kv_blocks);
      b.rows.attn.push_back({it.seq->kv_blocks.data(), pos + 1});
    }
  }
  const int64_t T = static_cast<int64_t>(b.tokens.size());
  b.rows.cos_sin.resize(T * rope.rotary_dim());
  rope.fill(b.rows.positions.data(), T, b.rows.cos_sin.data());
  return b;
}

ForwardResult finish_forward(std::span<const ForwardItem> items, const FlatBatch& batch,
                             const std::vector<float>& x, int64_t hidden, const OutputHead& head,
                             ThreadPool& threads) {
  ForwardResult r;
  std::vector<int64_t> out_rows;
  for (size_t i = 0; i < items.size(); ++i) {
    r.first_row.push_back(static_cast<int64_t>(out_rows.size()));
    const int64_t first = batch.item_first[i], n = static_cast<int64_t>(items[i].tokens.size());
    switch (items[i].logits) {
      case ForwardItem::Logits::None:
        break;
      case ForwardItem::Logits::Last:
        out_rows.push_back(first + n - 1);
        break;
      case ForwardItem::Logits::All:
        for (int64_t t = 0; t < n; ++t) out_rows.push_back(first + t);
        break;
    }
    items[i].seq->length += n;
  }
  r.rows = static_cast<int64_t>(out_rows.size());
  if (r.rows == 0) return r;
  std::vector<float> gathered(r.rows * hidden);
  for (int64_t i = 0; i < r.rows; ++i)
    std::memcpy(&gathered[i * hidden], &x[out_rows[i] * hidden], hidden * sizeof(float));
  r.hidden.resize(r.rows * hidden);
  kernels::rms_norm(gathered.data(), r.rows, hidden, head.final_norm->data(), head.eps,
                    head.zero_centered, r.hidden.data());
  r.logits.resize(r.rows * head.lm_head.rows);
  kernels::linear(r.hidden.data(), r.rows, head.lm_head, nullptr, r.logits.data(), threads);
  return r;
}

}  // namespace lockstep
