// Looking up a model's tensors by Hugging Face name with the shape the model expects.
#pragma once

#include <string>
#include <vector>

#include "io/safetensors.h"
#include "kernels/ops.h"

namespace lockstep {

// A matrix [rows][cols] in F32/BF16/F16, viewed in place in the mapped file.
kernels::Weight matrix(const Checkpoint& ckpt, const std::string& name, int64_t rows, int64_t cols);
// A vector of n elements converted to float32 (norm weights, biases: small, used every token).
std::vector<float> vector_f32(const Checkpoint& ckpt, const std::string& name, int64_t n);
// Any tensor converted to float32, checked against `shape`.
std::vector<float> tensor_f32(const Checkpoint& ckpt, const std::string& name,
                              const std::vector<int64_t>& shape);

}  // namespace lockstep
