// `lockstep quantize`: rewrites a float checkpoint in MLX's group-wise affine layout
// (kernels/quant_format.h): every 2-D float `*.weight` whose row length the group size divides
// becomes `.weight` (packed uint32 codes), `.scales` and `.biases`, and so does every stack of
// expert matrices (transformers' fused experts.gate_up_proj / experts.down_proj [E][rows][cols]:
// codes, .scales and .biases [E][rows][...], MLX's 3-D switch_mlp form under the same name);
// every other tensor (norms, biases, conv kernels, A_log, MoE routers, ...) is copied unchanged. config.json gains MLX's "quantization"
// block; tokenizer and generation files are copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lockstep {

struct QuantizeOptions {
  std::string in_dir, out_dir;
  int bits = 4;                  // 4 or 8
  int64_t group_size = 64;       // a multiple of 16
  bool keep_embeddings = false;  // embed_tokens and lm_head keep their float dtype
  int threads = 0;               // 0: all cores
};

struct QuantizeSummary {
  size_t quantized = 0, kept = 0;  // tensors
  size_t bytes_in = 0, bytes_out = 0;
};

QuantizeSummary quantize_checkpoint(const QuantizeOptions& options);

// The name a quantized matrix's .scales and .biases hang off: "x.weight" -> "x"; a fused expert
// stack (experts.gate_up_proj) keeps its name.
std::string tensor_stem(const std::string& name);

// Matrices both quantizers (this one and --quantize at load) keep in float: MoE routers
// (mlp.gate, shared_expert_gate: tiny, and a flipped routing decision costs more than the bytes),
// and embed_tokens / lm_head when keep_embeddings is set.
bool quantize_keeps_float(const std::string& name, bool keep_embeddings);

}  // namespace lockstep
