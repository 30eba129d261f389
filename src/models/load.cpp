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
  kv_pool().copy_prefix(src.kv_blocks, dst->kv_blocks, src.length);
  dst->length = src.length;
  dst->rollback_floor = src.rollback_floor;
  if (src.recurrent) dst->recurrent = src.recurrent->clone();
  truncate(*dst, length);
  return dst;
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
