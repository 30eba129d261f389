// The attention kernels at head_dim 256 (attention_kernels.cuh), in a translation unit of their own.
#include "kernels/cuda/attention_kernels.cuh"

namespace lockstep::kernels::cuda::attn {
template void run_attention<256>(AttnArgs, int64_t);
}  // namespace lockstep::kernels::cuda::attn
