#include "models/forward_common.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "core/error.h"

namespace lockstep {

FlatBatch flatten_batch(std::span<const ForwardItem> items, KvPool& pool,
                        const kernels::RopeTable& rope, int64_t max_positions, int64_t vocab,
                        kernels::Backend& be, bool recorded) {
  FlatBatch b;
  std::set<const SequenceState*> seen;
  for (const ForwardItem& it : items) {
    if (!it.seq) fail("forward: an item has no sequence");
    if (!seen.insert(it.seq).second) fail("forward: two items name the same sequence");
    if (it.tokens.empty()) fail("forward: an item has no tokens");
    for (int32_t id : it.tokens)
      if (id < 0 || id >= vocab)
        fail("token id ", id, " is outside the vocabulary [0, ", vocab, ")");
    const int64_t end = it.seq->length + static_cast<int64_t>(it.tokens.size());
    if (max_positions > 0 && end > max_positions)
      fail("sequence of ", end, " tokens exceeds the model's context of ", max_positions);
  }
  for (const ForwardItem& it : items) {
    // KV is written at positions >= length only; the blocks holding them must be private (fork
    // and truncate un-share them, KvPool). Checked before anything is written.
    LOCKSTEP_CHECK(pool.writable(it.seq->kv_blocks, it.seq->length),
                   "forward: a sequence would write into a KV block another holder reads");
    pool.reserve(it.seq->kv_blocks, it.seq->length + static_cast<int64_t>(it.tokens.size()));
  }

  int64_t stride = 1, max_keys = 0;
  for (const ForwardItem& it : items) {
    stride = std::max<int64_t>(stride, static_cast<int64_t>(it.seq->kv_blocks.size()));
    max_keys = std::max<int64_t>(max_keys, it.seq->length + static_cast<int64_t>(it.tokens.size()));
  }
  if (recorded) pad_to_key_bucket(max_keys, stride, pool.block_tokens());
  std::vector<int32_t> slots, tables, n_keys;
  for (const ForwardItem& it : items) {
    b.item_first.push_back(static_cast<int64_t>(b.tokens.size()));
    const std::vector<int32_t>& blocks = it.seq->kv_blocks;
    for (size_t i = 0; i < it.tokens.size(); ++i) {
      const int64_t pos = it.seq->length + static_cast<int64_t>(i);
      b.tokens.push_back(it.tokens[i]);
      b.rows.positions.push_back(pos);
      slots.push_back(pool.slot(blocks, pos));
      const size_t at = tables.size();
      tables.resize(at + stride, 0);
      std::copy(blocks.begin(), blocks.end(), tables.begin() + at);
      n_keys.push_back(static_cast<int32_t>(pos + 1));
    }
  }
  const int64_t T = static_cast<int64_t>(b.tokens.size());
  std::vector<float> cos_sin(T * rope.rotary_dim());
  rope.fill(b.rows.positions.data(), T, cos_sin.data());
  b.device_tokens = be.upload(b.tokens);
  b.rows.slots = be.upload(slots);
  b.rows.tables = be.upload(tables);
  b.rows.n_keys = be.upload(n_keys);
  b.rows.cos_sin = be.upload(cos_sin);
  b.rows.attn = {b.rows.tables.data(), stride, b.rows.n_keys.data(), max_keys};
  // The launch-shape hint (backend.h): the leading items of few rows (decode, verify). A
  // function of the items' token counts, so a recorded step's key covers it.
  kernels::AttentionBatch& hint = b.rows.attn;
  size_t i = 0;
  for (; i < items.size(); ++i) {
    const auto n = static_cast<int64_t>(items[i].tokens.size());
    if (n > kernels::kShortItemRows) break;
    hint.short_rows += n;
    hint.short_rows_per_item = std::max(hint.short_rows_per_item, n);
  }
  for (; i < items.size() && hint.long_items < hint.kMaxLongItems; ++i)
    hint.long_item_rows[hint.long_items++] = static_cast<int32_t>(items[i].tokens.size());
  return b;
}

void truncate_kv(KvPool& pool, SequenceState& seq, int64_t length) {
  if (length < 0 || length > seq.length)
    fail("truncate: length ", length, " outside [0, ", seq.length, "]");
  seq.length = length;
  pool.truncate(seq.kv_blocks, length);  // going back into a shared block un-shares it
}

std::string graph_key(std::string_view model, std::span<const ForwardItem> items, int64_t vocab,
                      int64_t max_tokens) {
  int64_t total = 0, max_keys = 0, logit_rows = 0;
  std::ostringstream key;
  key << model;
  for (const ForwardItem& it : items) {
    const int64_t n = static_cast<int64_t>(it.tokens.size());
    total += n;
    max_keys = std::max(max_keys, it.seq->length + n);
    switch (it.logits) {
      case ForwardItem::Logits::None:
        key << '|' << n << 'n';
        break;
      case ForwardItem::Logits::Last:
        key << '|' << n << 'l';
        logit_rows += 1;
        break;
      case ForwardItem::Logits::All:
        key << '|' << n << 'a';
        logit_rows += n;
        break;
    }
    if (it.keep_rollback) key << 'r';  // a hybrid verify block also copies its rollback data
  }
  if (!recordable_step(total, logit_rows, vocab, max_tokens)) return "";
  key << "|k" << key_bucket(max_keys);
  return key.str();
}

bool recordable_step(int64_t tokens, int64_t logit_rows, int64_t vocab, int64_t max_tokens) {
  return tokens <= max_tokens && logit_rows * vocab * 4 <= kRecordedMaxLogitBytes;
}

void pad_to_key_bucket(int64_t& max_keys, int64_t& stride, int64_t block_tokens) {
  max_keys = key_bucket(max_keys) * kKeyBucket;
  stride = std::max(stride, (max_keys + block_tokens - 1) / block_tokens);
}

ForwardResult finish_forward(std::span<const ForwardItem> items, const FlatBatch& batch,
                             const float* x, int64_t hidden, const OutputHead& head,
                             kernels::Backend& be) {
  ForwardResult r;
  std::vector<int32_t> out_rows;
  for (size_t i = 0; i < items.size(); ++i) {
    r.first_row.push_back(static_cast<int64_t>(out_rows.size()));
    const int64_t first = batch.item_first[i], n = static_cast<int64_t>(items[i].tokens.size());
    switch (items[i].logits) {
      case ForwardItem::Logits::None:
        break;
      case ForwardItem::Logits::Last:
        out_rows.push_back(static_cast<int32_t>(first + n - 1));
        break;
      case ForwardItem::Logits::All:
        for (int64_t t = 0; t < n; ++t) out_rows.push_back(static_cast<int32_t>(first + t));
        break;
    }
    items[i].seq->length += n;
  }
  r.rows = static_cast<int64_t>(out_rows.size());
  if (r.rows == 0) return r;
  kernels::Ints rows = be.upload(out_rows);
  kernels::Floats gathered = be.array<float>(r.rows * hidden);
  be.gather_rows(x, rows.data(), r.rows, hidden, gathered.data());
  kernels::Floats normed = be.array<float>(r.rows * hidden);
  be.rms_norm(gathered.data(), r.rows, hidden, head.final_norm->data(), head.eps,
              head.zero_centered, normed.data());
  kernels::Floats logits = be.array<float>(r.rows * head.lm_head.rows);
  be.linear(normed.data(), r.rows, head.lm_head, nullptr, logits.data());
  if (head.softcap > 0) be.softcap(logits.data(), r.rows * head.lm_head.rows, head.softcap);
  // Host work the items' rules wait for overlaps the device's forward (ForwardItem::before_choose).
  const auto has_hook = [](const ForwardItem& it) { return static_cast<bool>(it.before_choose); };
  if (std::any_of(items.begin(), items.end(), has_hook)) {
    be.launch_queued();
    for (const ForwardItem& it : items)
      if (it.before_choose) it.before_choose();
  }
  // Only what the items asked for crosses to the host: hidden rows if any item wants them, ids
  // for items with rules, logits if any item with output rows has none.
  const int64_t V = head.lm_head.rows;
  bool want_hidden = false, want_logits = false, want_ids = false;
  std::vector<kernels::TokenRule> rules(r.rows);
  for (size_t i = 0; i < items.size(); ++i) {
    const int64_t first = r.first_row[i];
    const int64_t n = (i + 1 < items.size() ? r.first_row[i + 1] : r.rows) - first;
    if (n == 0) continue;
    want_hidden |= items[i].hidden;
    if (items[i].choose.empty()) {
      want_logits = true;
      for (int64_t k = 0; k < n; ++k) rules[first + k].skip = true;
      continue;
    }
    if (static_cast<int64_t>(items[i].choose.size()) != n)
      fail("forward: an item has ", items[i].choose.size(), " token rules for ", n,
           " output rows");
    std::copy(items[i].choose.begin(), items[i].choose.end(), rules.begin() + first);
    want_ids = true;
  }
  if (want_hidden) r.hidden = be.download(normed.data(), r.rows * hidden);
  if (want_ids) {
    r.tokens.resize(r.rows);
    be.choose_tokens(logits.data(), V, rules, r.tokens.data());
  }
  if (want_logits) r.logits = be.download(logits.data(), r.rows * V);
  return r;
}

}  // namespace lockstep
