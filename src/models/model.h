// The model interface. A model knows nothing about batching policy or speculation: it runs
// "these tokens for these sequences" and returns logits (and hidden states when asked), and it
// owns the per-sequence state operations (append, truncate back, fork). Everything above it
// (decode loop, speculation, scheduler) talks to this interface only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/backend.h"
#include "models/config.h"
#include "models/kv_pool.h"

namespace lockstep {

// Recurrent state of hybrid models (conv and delta-rule state), opaque to callers.
class RecurrentState {
 public:
  virtual ~RecurrentState() = default;
  virtual std::unique_ptr<RecurrentState> clone() const = 0;
  virtual size_t bytes() const = 0;
};

// What a model keeps for one sequence between calls. Created by Model::new_sequence.
class SequenceState {
 public:
  explicit SequenceState(KvPool* pool) : pool_(pool) {}
  ~SequenceState() {
    if (pool_) pool_->shrink(kv_blocks, 0);
  }
  SequenceState(const SequenceState&) = delete;
  SequenceState& operator=(const SequenceState&) = delete;

  int64_t length = 0;                    // tokens consumed so far (next position)
  std::vector<int32_t> kv_blocks;        // blocks of the model's KvPool
  std::unique_ptr<RecurrentState> recurrent;
  // Smallest length truncate() may return to (recurrent models keep per-token states only for
  // the last forward that asked for them; attention-only models can always go back to 0).
  int64_t rollback_floor = 0;

 private:
  KvPool* pool_;
};

struct ForwardItem {
  SequenceState* seq = nullptr;
  std::span<const int32_t> tokens;  // appended at positions seq->length, seq->length + 1, ...
  enum class Logits { None, Last, All } logits = Logits::Last;
  // Keep what truncate() needs to return to any length inside this item (verify blocks).
  bool keep_rollback = false;
  // Tokens chosen by the backend (Backend::choose_tokens), one rule per output row of this item
  // in row order: their ids come back in ForwardResult::tokens and only ids cross from the device.
  // Empty: this item's output rows' logits come back in ForwardResult::logits instead.
  std::span<const kernels::TokenRule> choose = {};
  // Called once per forward, after its ops are launched (Backend::launch_queued) and before
  // `choose` is read: host work the rules wait for (a constraint's masks) runs here while the
  // device computes the logits. It may change the rules `choose` points to, not their number.
  std::function<void()> before_choose = {};
  // Return the output rows' final-normed hidden states (ForwardResult::hidden); a GPU forward
  // downloads them only when some item asks.
  bool hidden = true;
};

struct ForwardResult {
  int64_t rows = 0;                 // output rows, items in order
  std::vector<int64_t> first_row;   // per item: its first output row (its count follows)
  // [rows][vocab]; empty when every item with output rows had `choose` rules (then only their
  // ids crossed from the device).
  std::vector<float> logits;
  // [rows][hidden_size]: final-normed hidden of those rows; empty when no item asked for it.
  std::vector<float> hidden;
  // [rows]: the chosen ids of items with `choose` rules, -1 elsewhere; empty when no item had any.
  std::vector<int32_t> tokens;
};

struct ModelOptions {
  int64_t kv_capacity_tokens = 4096;  // over all sequences
  int64_t kv_block_tokens = 16;
  ThreadPool* pool = nullptr;         // nullptr: ThreadPool::global()
  // Where weights, KV cache and activations live and the kernels run (kernels/backend.h).
  kernels::Device device = kernels::Device::Cpu;
  // Quantize float matrices at load (kernels/quant_format.h): 0 (off), 4 or 8 bits per weight.
  int quantize_bits = 0;
  int64_t quantize_group_size = 64;
  bool quantize_keep_embeddings = false;  // embed_tokens and lm_head stay in their float dtype
};

// One MTP call's slots for one draft sequence (a SequenceState from new_draft_sequence()). Slot p =
// seq->length + i consumes hidden[i], the hidden state for position p (the backbone's final-normed
// hidden there, or for a chained draft the previous slot's output hidden), and tokens[i], the
// token at position p + 1; it yields logits for the token at p + 2 and its own output hidden.
struct DraftItem {
  SequenceState* seq = nullptr;
  std::span<const int32_t> tokens;
  std::span<const float> hidden;  // [tokens.size()][hidden_size]
  // As ForwardItem::choose: one rule per slot (empty: the slots' logits come back).
  std::span<const kernels::TokenRule> choose = {};
};

// A multi-token-prediction head carried by the checkpoint (Qwen3.5 / Qwen3-Next `mtp.*`), usable as
// a drafter. It keeps its own KV per draft sequence; several slots in one call (teacher-forced
// catch-up) and one slot per call give the same bits.
class MtpDrafter {
 public:
  virtual ~MtpDrafter() = default;
  virtual std::unique_ptr<SequenceState> new_draft_sequence() = 0;
  // Runs every item's slots; returns logits and output hidden for every slot (items in order).
  virtual ForwardResult draft(std::span<const DraftItem> items) = 0;
  // Forgets slots past `length` (0 <= length <= seq.length).
  virtual void truncate(SequenceState& seq, int64_t length) = 0;
};

// What a KV-sharing drafter (Gemma 4's assistant, models/gemma4_assistant.h) reads from its
// target, read only: the target's backend (the drafter's weights are placed in it, so it can
// attend to the target's cache wherever that lives), the cache, which pool layers hold the KV of
// the target's last full-attention and last sliding layer that compute their own (-1: none of
// that kind), and the target's scaled input embedding.
struct SharedKvSource {
  const ModelConfig* config = nullptr;
  kernels::Backend* backend = nullptr;
  const KvPool* kv = nullptr;
  int64_t full_kv_layer = -1, sliding_kv_layer = -1;  // KvPool layers
  int64_t full_source = -1, sliding_source = -1;      // the model layers they belong to
  kernels::Weight embed;                              // [vocab][hidden] in `backend`
  float embed_scale = 1.0f;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual std::unique_ptr<SequenceState> new_sequence() = 0;
  // Runs every item's tokens; each item must name a different sequence.
  virtual ForwardResult forward(std::span<const ForwardItem> items) = 0;
  // Forgets every token past `length` (rollback_floor <= length <= seq.length).
  virtual void truncate(SequenceState& seq, int64_t length) = 0;
  virtual const KvPool& kv_pool() const = 0;
  virtual KvPool& kv_pool() = 0;
  // A new sequence holding the first `length` tokens of `src`: it shares src's full KV blocks,
  // gets its own copy of the partly filled last one (copy on write, KvPool) and of the recurrent
  // state. What the prefix cache hands to a request sharing a prompt prefix. Needs
  // src.rollback_floor <= length <= src.length.
  std::unique_ptr<SequenceState> fork(const SequenceState& src, int64_t length);
  // A new sequence whose first `length` tokens (a whole number of blocks) are the KV in `blocks`,
  // shared: the block-granular prefix cache's hit. Only for models whose whole sequence state is
  // the KV cache (an Error for recurrent models, whose state cannot be rebuilt from blocks).
  std::unique_ptr<SequenceState> sequence_from_blocks(std::span<const int32_t> blocks,
                                                      int64_t length);
  // Bytes of recurrent state one sequence holds (0 for attention-only models).
  virtual size_t state_bytes_per_sequence() const { return 0; }
  // The checkpoint's MTP head, or nullptr when it has none (or the family has no such head).
  virtual MtpDrafter* mtp() { return nullptr; }
  // What a KV-sharing drafter reads (nullptr: the family lends none; Gemma 4 does).
  virtual const SharedKvSource* shared_kv_source() const { return nullptr; }
  // Where the model's weights and caches live (ModelOptions::device).
  virtual kernels::Device device() const { return kernels::Device::Cpu; }
};

// Loads the checkpoint in `dir` for its model_type (config.json).
std::unique_ptr<Model> load_model(const std::string& dir, const ModelOptions& options = {});

}  // namespace lockstep
