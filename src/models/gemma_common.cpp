#include "models/gemma_common.h"

#include <cmath>

namespace lockstep {

float gemma_embed_scale(int64_t n, DType embedding_dtype) {
  const float s = static_cast<float>(std::sqrt(static_cast<double>(n)));
  switch (embedding_dtype) {
    case DType::BF16: return bf16_to_f32(f32_to_bf16(s));
    case DType::F16: return f16_to_f32(f32_to_f16(s));
    default: return s;
  }
}

DType gemma_embedding_dtype(const Checkpoint& ckpt, const std::string& name) {
  const TensorInfo& t = ckpt.require(name);
  if (t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16) return t.dtype;
  const std::string scales = name.substr(0, name.size() - std::string("weight").size()) + "scales";
  if (const TensorInfo* s = ckpt.find(scales)) return s->dtype;
  return DType::F32;
}

GemmaNames gemma_tensor_names(const Checkpoint& ckpt, const ModelConfig& c) {
  const GemmaNames published{"language_model.model.", "language_model.lm_head.weight"};
  const GemmaNames modules{"model.language_model.", "lm_head.weight"};
  if (c.weight_prefix != published.prefix && c.weight_prefix != modules.prefix)
    return {c.weight_prefix, "lm_head.weight"};
  const GemmaNames& first = c.weight_prefix == published.prefix ? published : modules;
  const GemmaNames& other = c.weight_prefix == published.prefix ? modules : published;
  if (!ckpt.has(first.prefix + "embed_tokens.weight") &&
      ckpt.has(other.prefix + "embed_tokens.weight"))
    return other;
  return first;
}

}  // namespace lockstep
