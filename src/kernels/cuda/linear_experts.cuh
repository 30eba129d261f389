// The grouped expert linear (cuda_ops.h: linear_experts): every active expert's projections of one
// MoE layer in one launch, the expert ids and row ranges read from device memory (moe_group's
// table), so the launch is the same whatever the routing and records into a CUDA graph.
//
// A block runs the skinny kernel's body (linear_skinny.cuh) unchanged on one (expert, projection):
// grid x = the weight's row blocks, grid y = 8 MT-token tiles of the expert's rows, grid z =
// (active-expert slot, projection). The block reads its slot's (expert, first row, rows), leaves
// when the slot or the tile is empty, and otherwise hands the body a one-weight table holding
// that expert's weight, x at its first row (or x and the row map at its first row: x_rows) and y
// at its first row, with M = its rows. The body's
// K walk is fixed by (N, K) alone: S = split_count(N, K) pieces of split_len(K, S) k, k-steps in
// increasing k, the pieces merged in order, x rounded to BF16 nearest-even (here in the fragment,
// for every M: the same rounding as the bf16 conversion the M > 16 launches use). The rows per
// block, k per stage and stages are free choices, so every output is bitwise the per-expert
// linear() of those rows, BF16 or 4/8-bit kept quantized.
#pragma once

#include "kernels/cuda/linear_skinny.cuh"

namespace lockstep::kernels::cuda::lin {

// The BF16 config (16 weight rows, 128 k, 4 stages, as linear.cu's config 1) and the quantized one
// (32 rows, 64 k, 4 stages, two warps per row tile: linear_quant_skinny.cuh's config 2, which fits
// every shape).
using ExpertCfgBf16 = SkCfg<1, 128, 4>;
using ExpertCfgQuant = SkCfg<2, 64, 4, 2>;
template <int QB>
using ExpertCfg = std::conditional_t<QB == 0, ExpertCfgBf16, ExpertCfgQuant>;

// BF16 decode steps (at most 8 tokens, so at most 8 rows an expert) take their own ring config
// (expert_decode_config: a test's override, else LOCKSTEP_CUDA_EXPERT_CFG, else
// kExpertDecodeDefault). A decode launch has few bytes per block (a 768 x 2048 gate/up piece is
// 16 rows of 512 k), so how many blocks are resident at once (the ring's shared memory) matters as
// much as the bytes each has in flight. Every config walks K alike, so the choice never moves a
// bit (tests force each one). H200, qwen3-30b-a3b shape (12 layers), `bench -p 128 -n 64`, two
// alternated rounds: 0 875 / 873 tok/s, 1 920 / 909; also swept and dropped (fewer kernels to
// build): 64 k x 4 stages 890 / 902, 256 k x 2 stages 908 / 908.
// 0: ExpertCfg<0> (16 rows, 128 k, 4 stages), as the calls of more tokens.
using ExpertDecodeCfg1 = SkCfg<1, 128, 2>;  // half the ring: twice the blocks resident
constexpr int kExpertDecodeConfigs = 2;
constexpr int kExpertDecodeDefault = 1;
int expert_decode_config();
// Calls of 9 to 64 tokens (batched decode, verify blocks; BF16 or quantized): token tiles of 8
// rows (MT = 1, as a decode launch, with its config: an expert's rows past 8 take a second tile,
// which reads the weights again) or of 16 (MT = 2, x staged for 16 FP32 rows: one BF16 block per
// multiprocessor at 4 pieces). expert_batch_tile_rows: a test's override, else
// LOCKSTEP_CUDA_EXPERT_BATCH_TILE (8 or 16), else kExpertBatchTileDefault. The K walk is the same
// either way, so the bits are too. 8 is the default: H100, 64 sequences decoding together
// (`bench --batch 64 -p 512 -n 32`), two alternated rounds, a step of 11.86 ms against 14.99
// (qwen3.5-35b-a3b shape, 12 layers) and 4.06 against 5.69 (qwen3-30b-a3b, 6 layers): more blocks
// resident outweigh the second read of the busier experts' weights.
constexpr int kExpertBatchTileDefault = 8;
int expert_batch_tile_rows();

template <int MT, int S, int QB, typename CF = ExpertCfg<QB>>
__global__ void __launch_bounds__(Skinny<MT, true, S, CF, QB>::kThreads,
                                  Skinny<MT, true, S, CF, QB>::kMinBlocks)
    linear_experts_kernel(const __grid_constant__ ExpertArgs a) {
  // The table is written by moe_group, the kernel before: read only after the wait (the body's
  // own PDL calls are then no-ops).
  pdl_launch_dependents();
  pdl_wait();
  ExpertBlock b;
  if (!expert_block(a, 8 * MT, b)) return;
  const int e = b.e, p = b.p, first = b.first, rows = b.rows;
  Outs o{};
  o.w[0] = static_cast<const uint16_t*>(a.w[e * a.P + p]);
  o.bias[0] = nullptr;
  o.y[0] = a.y[p] + static_cast<int64_t>(first) * a.N;
  o.N[0] = a.N;
  o.end[0] = static_cast<int>(gridDim.x);
  o.n = 1;
  const uint32_t* sb = QB == 0 ? nullptr : a.sb[e * a.P + p];
  // The expert's rows: through the row map from its first entry, or x from its first row.
  const int32_t* xrows = a.x_rows ? a.x_rows + first : nullptr;
  const float* x = a.x_rows ? a.x : a.x + static_cast<int64_t>(first) * a.K;
  skinny_body<MT, true, S, CF, QB>(o, x, rows, a.K, a.Ks, sb, a.lg, a.pair_fmt, xrows);
}

// Launches the grouped kernel at QB for T tokens (an expert has at most T rows) and `slots`
// active-expert slots; false when its shared memory does not fit the device.
template <int QB>
bool launch_experts(const ExpertArgs& a, int S, int T, int slots) {
  auto go_cfg = [&](auto mt, auto s, auto cf) {
    constexpr int MT = decltype(mt)::value, SS = decltype(s)::value;
    using CF = decltype(cf);
    using C = Skinny<MT, true, SS, CF, QB>;
    // x staging for the rows a block can get: an expert has at most T of them. Sized for 8 MT
    // rows whatever T, a decode step's launch took 1 block per multiprocessor instead of 3.
    const int bytes = C::smem(std::min(8 * MT, T));
    if (bytes > smem_optin()) return false;
    constexpr auto kernel = linear_experts_kernel<MT, SS, QB, CF>;
    allow_smem_max<kernel>();
    const dim3 grid((a.N + C::kRows - 1) / C::kRows, (T + 8 * MT - 1) / (8 * MT), slots * a.P);
    launch(QB == 0 ? "linear_experts (skinny kernel)" : "linear_experts (quantized skinny kernel)",
           kernel, grid, C::kThreads, bytes, a);
    return true;
  };
  auto go = [&](auto mt, auto s) {
    if constexpr (QB == 0 && decltype(mt)::value == 1) {
      if (expert_decode_config() == 1) return go_cfg(mt, s, ExpertDecodeCfg1{});
    }
    return go_cfg(mt, s, ExpertCfg<QB>{});
  };
  using I1 = std::integral_constant<int, 1>;
  using I2 = std::integral_constant<int, 2>;
  using I4 = std::integral_constant<int, 4>;
  // Quantized calls of more than 64 tokens (a prefill chunk) come here too and take 16-row tiles.
  if (T <= 8 || (T <= 64 && expert_batch_tile_rows() == 8)) {
    if (S == 4) return go(I1{}, I4{});
    if (S == 2) return go(I1{}, I2{});
    return go(I1{}, I1{});
  }
  if (S == 4) return go(I2{}, I4{});
  if (S == 2) return go(I2{}, I2{});
  return go(I2{}, I1{});
}

bool launch_experts_q4(const ExpertArgs& a, int S, int T, int slots);
bool launch_experts_q8(const ExpertArgs& a, int S, int T, int slots);

}  // namespace lockstep::kernels::cuda::lin
