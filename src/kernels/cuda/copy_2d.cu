// Strided row copies (cuda_ops.h, copy_2d): column blocks of activations, e.g. [qkv | a | b].
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace lockstep::kernels::cuda {

void copy_2d(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows,
             int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  detail::note_stream_op();
  detail::check(cudaMemcpy2DAsync(dst, dst_stride * sizeof(float), src, src_stride * sizeof(float),
                                  cols * sizeof(float), rows, cudaMemcpyDeviceToDevice,
                                  detail::stream()),
                "copy_2d");
}

}  // namespace lockstep::kernels::cuda
