// The quantized skinny launches (M <= 64) of one code width: the kernels of linear_skinny.cuh at
// QB = 4 or 8, instantiated by linear_q4.cu and linear_q8.cu (apart, so the two widths compile in
// parallel). Few configurations on purpose: the k walk, operands and merge are every config's,
// so the choice is speed only. Each has two warps per row tile (DQ = 2): the dequantization is
// ALU work, and one warp per tile left too few warps per multiprocessor to hide its latency
// (H200, Qwen3-8B decode: 82 tok/s at 8 bits against 166 at BF16).
// - M <= 16 (x read as FP32): 32 rows of 128 k, 6 stages (the most bytes in flight: a stage
//   carries half or a quarter of a BF16 stage's bytes), else, where that does not fit (S = 4 with
//   more than a few tokens), 32 rows of 64 k, 4 stages.
// - M in 17..64 (x converted to bf16 once): 32 rows of 64 k, 4 stages, one warp per row tile
//   (these carry 4 or 8 token columns of fragments: with dequant warps' 128-register cap they
//   spilled).
#pragma once

#include "kernels/cuda/linear_skinny.cuh"

namespace lockstep::kernels::cuda::lin {

using QkBig = SkCfg<2, 128, 6, 2>;
using QkSmall = SkCfg<2, 64, 4, 2>;
using QkWide = SkCfg<2, 64, 4, 1>;  // bf16 x, M 17..64: 8 MT token columns of fragments spill at 128

template <int MT, bool XF32, typename CF, int QB>
bool quant_launch_s(const Group& g, const void* x, int M, int K, int S, const SkQuant& q) {
  const int Ks = split_len(K, S);
  if (S == 4) return launch_skinny3<MT, XF32, 4, CF, QB>(g, x, M, K, Ks, q);
  if (S == 2) return launch_skinny3<MT, XF32, 2, CF, QB>(g, x, M, K, Ks, q);
  return launch_skinny3<MT, XF32, 1, CF, QB>(g, x, M, K, Ks, q);
}

// One quantized weight (g holds it alone; its codes as g's weight pointer) against x, M <= 64.
// force: 0 = the rule above, 1 = the 128-k config first, 2 = the 64-k config only (M <= 16).
// Returns the config that ran (1 = 128 k, 2 = 64 k with FP32 x, 3 = 64 k with bf16 x), or 0 when
// none fits the device's shared memory (nothing launched; the caller falls back).
template <int QB>
int quant_skinny(const Group& g, const float* x, int M, int K, int S, const SkQuant& q, int force) {
  if (M <= 16) {
    if (force != 2) {
      const bool ok = M <= 8 ? quant_launch_s<1, true, QkBig, QB>(g, x, M, K, S, q)
                             : quant_launch_s<2, true, QkBig, QB>(g, x, M, K, S, q);
      if (ok) return 1;
    }
    const bool ok = M <= 8 ? quant_launch_s<1, true, QkSmall, QB>(g, x, M, K, S, q)
                           : quant_launch_s<2, true, QkSmall, QB>(g, x, M, K, S, q);
    return ok ? 2 : 0;
  }
  const uint16_t* xb = x_to_bf16(x, M, K);
  const bool ok = M <= 32 ? quant_launch_s<4, false, QkWide, QB>(g, xb, M, K, S, q)
                          : quant_launch_s<8, false, QkWide, QB>(g, xb, M, K, S, q);
  return ok ? 3 : 0;
}

int quant_skinny4(const Group& g, const float* x, int M, int K, int S, const SkQuant& q, int force);
int quant_skinny8(const Group& g, const float* x, int M, int K, int S, const SkQuant& q, int force);

}  // namespace lockstep::kernels::cuda::lin
