// The tensors a Hugging Face checkpoint of a given architecture holds: names exactly as
// transformers saves them (weight_prefix + "layers.N.self_attn.q_proj.weight", ...) and shapes
// derived from the config. make-random writes this list; tests use it to build checkpoints.
#pragma once

#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/config.h"

namespace lockstep {

// How a tensor's values are conventionally initialised (make-random draws accordingly).
enum class TensorRole {
  Weight,        // linear / embedding: small normal values
  Bias,          // small normal values
  NormOne,       // standard RMSNorm scale, near 1
  NormZero,      // zero-centred (1 + w) RMSNorm scale, near 0
  Conv,          // depthwise conv kernel: uniform in +-1/sqrt(kernel)
  ALog,          // Gated DeltaNet A_log: log of uniform(1, 16)
  DtBias,        // Gated DeltaNet dt_bias: near 1
};

struct LayoutTensor {
  TensorHeader header;  // name, dtype, shape
  TensorRole role = TensorRole::Weight;
};

// Every tensor of the model (and of its MTP head when mtp_num_hidden_layers > 0), in the order
// transformers would visit them. Every tensor takes `dtype`.
std::vector<LayoutTensor> checkpoint_layout(const ModelConfig& c, DType dtype);

}  // namespace lockstep
