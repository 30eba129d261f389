// The 4-bit grouped expert launches (linear_experts.cuh), in a file of their own so the code
// widths compile in parallel.
#include "kernels/cuda/linear_experts.cuh"

namespace lockstep::kernels::cuda::lin {

bool launch_experts_q4(const ExpertArgs& a, int S, int T, int slots) {
  return launch_experts<4>(a, S, T, slots);
}

}  // namespace lockstep::kernels::cuda::lin
