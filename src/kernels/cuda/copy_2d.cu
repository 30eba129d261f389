// Strided row copies (cuda_ops.h, copy_2d): column blocks of activations, e.g. [qkv | a | b].
//
// A kernel, not cudaMemcpy2DAsync: a copy node in a recorded step cannot take part in
// programmatic dependent launch (common.cuh), so the kernel after it started only once the copy
// had finished in full, and the copy itself cost a node's latency. A decode step of a Gated
// DeltaNet layer made three of these a layer. Plain copies: no arithmetic, so no bits move.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_caps.h"

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 256;

// Element i of the rows x cols block: row i / cols, column i % cols.
__global__ void copy_2d_kernel(float* __restrict__ dst, int64_t dst_stride,
                               const float* __restrict__ src, int64_t src_stride, int64_t rows,
                               int64_t cols) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t n = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    dst[r * dst_stride + c] = src[r * src_stride + c];
  }
}

}  // namespace

void copy_2d(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows,
             int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  // Grid-stride: at most 8 blocks a multiprocessor (a prefill chunk's threads loop).
  const unsigned blocks = std::min<unsigned>(blocks_for(rows * cols, kThreads),
                                             8u * static_cast<unsigned>(device_caps().sm_count));
  launch("copy_2d_kernel", copy_2d_kernel, blocks, kThreads, 0, dst, dst_stride, src, src_stride,
         rows, cols);
}

}  // namespace lockstep::kernels::cuda
