// The parts of a forward call every model family shares: flattening items into rows, reserving
// KV blocks, rotary tables, and turning the final hidden states into the requested outputs.
#pragma once

#include <exception>
#include <span>
#include <vector>

#include "kernels/rope_table.h"
#include "models/attention_layer.h"
#include "models/model.h"

namespace lockstep {

struct FlatBatch {
  std::vector<int32_t> tokens;      // host: all items' tokens, in order
  kernels::Ints device_tokens;      // the same in the backend's memory
  BatchRows rows;
  std::vector<int64_t> item_first;  // per item: first row
};

// Validates items (and token ids against `vocab`), reserves KV blocks for every new position, and
// fills positions, KV slots, block tables and cos/sin for all rows in the backend's memory.
// A recorded step (graph_key) pads the block tables and rounds the attention key bound up so
// that both depend only on the key.
FlatBatch flatten_batch(std::span<const ForwardItem> items, KvPool& pool,
                        const kernels::RopeTable& rope, int64_t max_positions, int64_t vocab,
                        kernels::Backend& be, bool recorded = false);

// The key of a forward that a backend may record and replay (Backend::begin_step): the items'
// token counts, output modes and keep_rollback flags and the attention bound rounded up to
// kKeyBucket positions; "" when the call is too large to be worth recording (prefill): more than
// `max_tokens` tokens, or more logit rows than fit the step arena beside the activations. Nothing
// that differs between sequences is in it: per-sequence addresses (KV blocks, recurrent state,
// rollback buffers) reach the kernels through tables uploaded with the step.
// kRecordedMaxTokens covers batched decode of up to 256 sequences (and verify blocks of fewer):
// replaying such a step saves the host hundreds of launches, about 2 ms of an 8B model's step.
inline constexpr int64_t kRecordedMaxTokens = 256, kKeyBucket = 256;
// Logit bytes a recorded step may hold (the CUDA step arena is 512 MiB).
inline constexpr int64_t kRecordedMaxLogitBytes = int64_t{256} << 20;
std::string graph_key(std::string_view model, std::span<const ForwardItem> items, int64_t vocab,
                      int64_t max_tokens = kRecordedMaxTokens);
// The parts of that rule other recorded steps share (the Gemma 4 assistant's draft steps): whether
// `tokens` rows with `logit_rows` rows of logits may be recorded, the key bucket of an attention
// bound, and the bound and block-table stride a recorded step pads to (both from the key alone;
// attention's bits never depend on either).
bool recordable_step(int64_t tokens, int64_t logit_rows, int64_t vocab,
                     int64_t max_tokens = kRecordedMaxTokens);
inline int64_t key_bucket(int64_t max_keys) { return (max_keys + kKeyBucket - 1) / kKeyBucket; }
void pad_to_key_bucket(int64_t& max_keys, int64_t& stride, int64_t block_tokens);

// Brackets a forward with begin_step / end_step (end_step also when the forward throws).
class RecordedStep {
 public:
  RecordedStep(kernels::Backend& be, const std::string& key)
      : be_(be), exceptions_(std::uncaught_exceptions()) {
    be_.begin_step(key);
  }
  ~RecordedStep() { be_.end_step(std::uncaught_exceptions() == exceptions_); }
  RecordedStep(const RecordedStep&) = delete;
  RecordedStep& operator=(const RecordedStep&) = delete;

 private:
  kernels::Backend& be_;
  int exceptions_;
};

// truncate() of a model whose only state is its KV cache (every position can be dropped):
// forgets the tokens past `length` (0 <= length <= seq.length), gives back their blocks and
// un-shares the block `length` now falls in (the next write goes there).
void truncate_kv(KvPool& pool, SequenceState& seq, int64_t length);

// Final norm and lm_head on the rows the items asked for, copied to the host; advances each
// sequence's length. x: [rows][hidden] in the backend's memory.
struct OutputHead {
  const kernels::Floats* final_norm;
  kernels::Weight lm_head;
  float eps;
  bool zero_centered;
  float softcap = 0;  // > 0: logits = softcap * tanh(logits / softcap) (Gemma)
};
ForwardResult finish_forward(std::span<const ForwardItem> items, const FlatBatch& batch,
                             const float* x, int64_t hidden, const OutputHead& head,
                             kernels::Backend& be);

}  // namespace lockstep
