// Picks the model implementation for a checkpoint's model_type.
#include "core/error.h"
#include "models/dense.h"
#include "models/gemma3.h"
#include "models/gemma4.h"
#include "models/model.h"
#include "models/qwen3_5.h"

namespace lockstep {

std::unique_ptr<SequenceState> Model::fork(const SequenceState& src, int64_t length) {
  if (length < src.rollback_floor || length > src.length)
    fail("fork: length ", length, " outside [", src.rollback_floor, ", ", src.length, "]");
  auto dst = new_sequence();
  // Every block of src is shared, not copied; truncate then lets go of those past `length` and
  // un-shares the block `length` falls in (KvPool::make_writable), so dst never writes where src
  // or another holder reads. The recurrent state is small and is copied.
  kv_pool().share_prefix(src.kv_blocks, dst->kv_blocks, src.length);
  dst->length = src.length;
  dst->rollback_floor = src.rollback_floor;
  if (src.recurrent) dst->recurrent = src.recurrent->clone();
  truncate(*dst, length);
  LOCKSTEP_CHECK(kv_pool().writable(dst->kv_blocks, dst->length),
                 "fork: the forked sequence's last block is still shared");
  return dst;
}

std::unique_ptr<SequenceState> Model::sequence_from_blocks(std::span<const int32_t> blocks,
                                                           int64_t length) {
  KvPool& pool = kv_pool();
  if (length < 0 || length % pool.block_tokens() != 0 ||
      pool.blocks_for(length) != static_cast<int64_t>(blocks.size()))
    fail("sequence_from_blocks: ", blocks.size(), " blocks for ", length,
         " tokens (whole blocks only)");
  auto seq = new_sequence();
  if (seq->recurrent)
    fail("sequence_from_blocks: the model keeps recurrent state; fork a snapshot instead");
  // Whole blocks only: the sequence's next write opens a new block, so it never writes into one
  // it shares.
  for (int32_t b : blocks) {
    pool.retain(b);
    seq->kv_blocks.push_back(b);
  }
  seq->length = length;
  return seq;
}

std::unique_ptr<Model> load_model(const std::string& dir, const ModelOptions& options) {
  const ModelConfig config = load_model_config(dir);
  const std::string& t = config.model_type;
  if (t == "llama" || t == "mistral" || t == "qwen2" || t == "qwen3" || t == "qwen3_moe")
    return load_dense_model(config, dir, options);
  if (t == "qwen3_5_text" || t == "qwen3_5_moe_text" || t == "qwen3_next")
    return load_qwen3_5_model(config, dir, options);
  if (t == "gemma3_text") return load_gemma3_model(config, dir, options);
  if (t == "gemma4_text") return load_gemma4_model(config, dir, options);
  fail(config.source, ": model_type \"", t, "\" has no forward implementation");
}

}  // namespace lockstep
