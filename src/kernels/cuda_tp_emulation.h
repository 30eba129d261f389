// Tensor parallelism emulated on one GPU, for the CUDA backend (LOCKSTEP_CUDA_TP_EMULATE=R, a test
// switch; docs/design-notes.md, "Tensor parallelism across GPUs"): beside each row- or
// column-parallel weight the backend places, the R ranks' shards, and the weight's linears run
// through them one rank after another (kernels/cuda/tensor_parallel.cu), bitwise the one-GPU
// linears. Built only with CUDA.
#pragma once
#ifdef LOCKSTEP_HAVE_CUDA

#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"

namespace lockstep::kernels {

class TensorParallelEmulation {
 public:
  // From LOCKSTEP_CUDA_TP_EMULATE: null when unset or empty; throws lockstep::Error naming the
  // variable unless it is a rank count from 1 to 64. Says on stderr that it is on.
  static std::unique_ptr<TensorParallelEmulation> from_env();
  explicit TensorParallelEmulation(int ranks) : ranks_(ranks) {}
  // Prints how many weights and calls were emulated; frees the shards (the backend has waited for
  // the GPU by then).
  ~TensorParallelEmulation();
  TensorParallelEmulation(const TensorParallelEmulation&) = delete;
  TensorParallelEmulation& operator=(const TensorParallelEmulation&) = delete;

  // A row-parallel weight: its pieces' BF16 columns cut from `host` (the values place() uploads,
  // so a quantized weight's shards are its dequantization, which its quantized linears equal),
  // then `place` makes the weight itself (after the cut: it drops the checkpoint's pages).
  Weight place_row_parallel(const Weight& host, ThreadPool& threads,
                            const std::function<Weight(const Weight&)>& place);
  // A column-parallel weight, already placed: the ranks' rows as views into it (BF16 or
  // quantized), each walking K in the whole weight's pieces.
  void add_column_parallel(const Weight& placed);
  // Runs y = x W^T (+ bias) through the ranks when `w` is one of the weights above (true), else
  // leaves it to the caller (false).
  bool linear(const float* x, int64_t M, const Weight& w, const float* bias, float* y) const;

 private:
  int ranks_;
  std::vector<void*> memory_;  // the row-parallel shards' device copies
  std::unordered_map<const void*, cuda::RowParallelShards> row_;        // by the placed data
  std::unordered_map<const void*, cuda::ColumnParallelShards> column_;  // by the placed data
};

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_HAVE_CUDA
