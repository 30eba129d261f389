// The 4-bit quantized skinny launches (linear_quant_skinny.cuh), in a file of their own so the two
// code widths compile in parallel.
#include "kernels/cuda/linear_quant_skinny.cuh"

namespace lockstep::kernels::cuda::lin {

int quant_skinny4(const Group& g, const float* x, int M, int K, int S, const SkQuant& q, int force,
                  int cfg, int* cfg_used) {
  return quant_skinny<4>(g, x, M, K, S, q, force, cfg, cfg_used);
}

}  // namespace lockstep::kernels::cuda::lin
