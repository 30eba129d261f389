// Picks the model implementation for a checkpoint's model_type.
#include "core/error.h"
#include "models/dense.h"
#include "models/model.h"
#include "models/qwen3_5.h"

namespace lockstep {

std::unique_ptr<Model> load_model(const std::string& dir, const ModelOptions& options) {
  const ModelConfig config = load_model_config(dir);
  if (config.model_type == "llama" || config.model_type == "qwen2" ||
      config.model_type == "qwen3")
    return load_dense_model(config, dir, options);
  if (config.model_type == "qwen3_5_text" || config.model_type == "qwen3_next")
    return load_qwen3_5_model(config, dir, options);
  fail(config.source, ": model_type \"", config.model_type,
       "\" has no forward implementation yet (supported: llama, qwen2, qwen3, qwen3_5, "
       "qwen3_5_text, qwen3_next)");
}

}  // namespace lockstep
