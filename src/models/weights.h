// Looking up a model's tensors by Hugging Face name with the shape the model expects.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "kernels/ops.h"
#include "kernels/quant_format.h"
#include "models/model.h"

namespace lockstep {

// A matrix [rows][cols], viewed in place in the mapped file: F32/BF16/F16, or MLX group-wise
// affine when `<stem>.scales` exists beside `<stem>.weight` (`.weight` packed uint32
// [rows][cols * bits / 32], `.scales` and `.biases` [rows][cols / group_size]; bits and group
// size are read from those shapes, so per-layer overrides load too). While a QuantizeOnLoad for
// `ckpt` is alive, float matrices are quantized instead (owned by it).
kernels::Weight matrix(const Checkpoint& ckpt, const std::string& name, int64_t rows, int64_t cols);
// Rows [row_begin, row_begin + rows) of matrix `index` in a stacked tensor `name` of `count`
// matrices [count][total_rows][cols] (fused experts: experts.gate_up_proj [E][2I][H]), viewed in
// place: float, or MLX group-wise affine when `<stem>.scales` exists (codes [count][total_rows]
// [cols * bits / 32], scales and biases [count][total_rows][cols / group_size]: MLX's switch_mlp
// layout). Quantized on load like matrix() while a QuantizeOnLoad is alive.
kernels::Weight stacked_matrix(const Checkpoint& ckpt, const std::string& name, int64_t count,
                               int64_t total_rows, int64_t cols, int64_t index, int64_t row_begin,
                               int64_t rows);
// A vector of n elements converted to float32 (norm weights, biases: small, used every token).
std::vector<float> vector_f32(const Checkpoint& ckpt, const std::string& name, int64_t n);
// Any tensor converted to float32, checked against `shape`.
std::vector<float> tensor_f32(const Checkpoint& ckpt, const std::string& name,
                              const std::vector<int64_t>& shape);

// `--quantize` for a float checkpoint: while this object lives, matrix() on `ckpt` returns
// quantized copies of float matrices, which this object owns (a model keeps it beside its
// checkpoint). Embeddings and lm_head stay float when keep_embeddings is set; matrices whose row
// length the group size does not divide stay float always (as MLX does).
class QuantizeOnLoad {
 public:
  QuantizeOnLoad(const Checkpoint& ckpt, const ModelOptions& options);
  ~QuantizeOnLoad();
  QuantizeOnLoad(const QuantizeOnLoad&) = delete;
  QuantizeOnLoad& operator=(const QuantizeOnLoad&) = delete;

  // The weight to use for the float matrix `w` named `name`.
  kernels::Weight convert(const std::string& name, const kernels::Weight& w);

 private:
  const Checkpoint* ckpt_;
  int bits_;
  int64_t group_size_;
  bool keep_embeddings_;
  ThreadPool* pool_;
  std::deque<kernels::QuantizedMatrix> owned_;
};

// A QuantizeOnLoad when options.quantize_bits is set (else nullptr).
std::unique_ptr<QuantizeOnLoad> quantize_on_load(const Checkpoint& ckpt,
                                                 const ModelOptions& options);

}  // namespace lockstep
