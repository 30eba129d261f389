// The 8-bit grouped expert launches (linear_experts.cuh), in a file of their own so the code
// widths compile in parallel.
#include "kernels/cuda/linear_experts.cuh"

namespace lockstep::kernels::cuda::lin {

bool launch_experts_q8(const ExpertArgs& a, int S, int T, int slots) {
  return launch_experts<8>(a, S, T, slots);
}

bool launch_experts_glu_q8(const ExpertArgs& a, int S, int T, int slots, bool gelu) {
  return launch_experts_glu<8>(a, S, T, slots, gelu);
}

}  // namespace lockstep::kernels::cuda::lin
