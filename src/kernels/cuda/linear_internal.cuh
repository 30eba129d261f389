// Shared pieces of the CUDA linear kernels: linear.cu (the skinny kernels, groups, the entry
// points) and linear_tiled.cu (the tiled M > 64 kernels). The schedule they all follow is stated
// at the top of linear.cu.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/k_pieces.h"
#include "kernels/cuda/mma.cuh"

namespace lockstep::kernels::cuda::lin {

using namespace detail;

// Byte offset of 16-byte chunk c of row r in a tile whose rows are `row_bytes` long, XOR-swizzled
// so the 8 rows an ldmatrix reads hit 8 different bank groups.
__device__ __forceinline__ uint32_t swz(int r, int c, int row_bytes) {
  return static_cast<uint32_t>(r * row_bytes + ((c ^ (r & 7)) << 4));
}

// ((part[0] + part[1]) + part[2]) + ... part[S-1] at element i of S planes `plane` floats apart, one
// __fadd_rn each in piece order: the merge the unsplit kernels do in registers, written out
// (merge_pieces after SPLIT wgmma tiles; the row-parallel merge, tensor_parallel.cu).
__device__ __forceinline__ float sum_pieces(const float* __restrict__ part, int64_t plane,
                                            int64_t i, int S) {
  float v = part[i];
  for (int p = 1; p < S; ++p) v = __fadd_rn(v, part[p * plane + i]);
  return v;
}

// --- the weights of one launch -------------------------------------------------------------------
// A launch covers up to kMaxOuts weights that share x (so K) and S: the blocks along grid x are
// the first weight's row blocks, then the second's, ... (end[i] = blocks of weights 0..i). A block
// finds its weight and then runs exactly the one-weight code on it: only addresses change, never
// the K walk, so every y is bitwise what a separate linear() of its weight gives.
constexpr int kMaxOuts = 4;
struct Outs {
  const uint16_t* w[kMaxOuts];
  const float* bias[kMaxOuts];
  float* y[kMaxOuts];
  int N[kMaxOuts];
  int end[kMaxOuts];
  int n;
};
struct Out1 {
  const uint16_t* w;
  const float* bias;
  float* y;
  int N;
  int bx;  // the block's index among its weight's row blocks
};
// MULTI = false: the launch has one weight (linear()), read straight from the parameters.
template <bool MULTI>
__device__ __forceinline__ Out1 pick(const Outs& o) {
  Out1 r{o.w[0], o.bias[0], o.y[0], o.N[0], static_cast<int>(blockIdx.x)};
  if constexpr (MULTI) {
#pragma unroll
    for (int i = 1; i < kMaxOuts; ++i)
      if (i < o.n && static_cast<int>(blockIdx.x) >= o.end[i - 1])
        r = Out1{o.w[i], o.bias[i], o.y[i], o.N[i], static_cast<int>(blockIdx.x) - o.end[i - 1]};
  }
  return r;
}

// Raises a kernel's dynamic shared-memory limit, once per kernel (the static lives in each
// instantiation of this template, one per kernel).
template <auto Kernel>
void allow_smem(int bytes) {
  static const bool done = [&] {
    check(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
          "linear: set shared memory limit");
    return true;
  }();
  (void)done;
}

// One launch's weights (all with the same K and S): the table the kernels read, with the block
// ends filled in for `rows` weight rows per block.
struct Group {
  Outs o{};
  int total_n = 0;  // the weights' rows together
  int S = 1;        // the pieces every weight of the group walks K in (pieces_of)
  void add(const uint16_t* w, const float* bias, float* y, int N) {
    o.w[o.n] = w, o.bias[o.n] = bias, o.y[o.n] = y, o.N[o.n] = N;
    ++o.n;
    total_n += N;
  }
  int blocks(int rows) const {  // along grid x
    int b = 0;
    for (int i = 0; i < o.n; ++i) b += (o.N[i] + rows - 1) / rows;
    return b;
  }
  Outs table(int rows) const {
    Outs t = o;
    int b = 0;
    for (int i = 0; i < o.n; ++i) t.end[i] = b += (o.N[i] + rows - 1) / rows;
    return t;
  }
};

inline int sm_count() { return device_caps().sm_count; }

// x [M][K] rounded to bf16 (nearest-even) into the linear's scratch slot 0 (linear.cu), for the
// skinny kernels of M > 16 and the tiled kernels. With rows ([M]), row m is x's row rows[m] (the
// grouped expert launches' tokens, gathered in the same pass).
const uint16_t* x_to_bf16(const float* x, int64_t M, int64_t K, const int32_t* rows = nullptr);

// linear() of a quantized weight in the GPU layout of linear_quant.cuh (linear_quant.cu).
void linear_quant(const float* x, int64_t M, const Weight& w, const float* bias, float* y);

// The tiled kernels (linear_tiled.cu): one group against bf16 x, M > 64 (or M > 16 where
// wgmma_for_batch says so), split count S. On a
// compute capability 9.0 device it runs the wgmma kernel (linear_wgmma.cu), else (or with
// LOCKSTEP_CUDA_WGMMA=0, or a forced mma.sync tile) the mma.sync tiles; the bits are the same.
void launch_tiled(const Group& g, const uint16_t* x, int M, int K, int S);

// One grouped expert launch (linear_experts.cuh, linear_tiled.cu): P <= kMaxExpertProj projections
// (gate and up share x) of every active expert of moe_group's table.
constexpr int kMaxExpertProj = 2;
struct ExpertArgs {
  const void* const* w;       // [E][P] device: each expert's weight (codes) per projection
  const uint32_t* const* sb;  // [E][P] device: quantized scale/bias pairs (null for BF16)
  const float* x;             // [n][K] grouped rows, or with x_rows the call's token rows
  const int32_t* x_rows;      // [n] grouped row -> row of x (moe_group's source), or null
  float* y[kMaxExpertProj];   // per projection [n][N]
  const int32_t* groups;      // moe_group: [0] active experts, then (expert, first, rows) each
  int N, K, Ks, P, lg, pair_fmt;
};
// A grouped launch's block (grid z = active-expert slot x P + projection, grid y = tiles of
// tile_rows of the expert's rows): its expert, projection and rows from the groups table; false
// when the slot is inactive or the tile lies past the expert's rows (the block then leaves).
struct ExpertBlock {
  int e, p, first, rows;
};
__device__ __forceinline__ bool expert_block(const ExpertArgs& a, int tile_rows, ExpertBlock& b) {
  const int s = static_cast<int>(blockIdx.z) / a.P;
  if (s >= a.groups[0]) return false;
  const int32_t* g = a.groups + 1 + 3 * s;
  b = ExpertBlock{g[0], static_cast<int>(blockIdx.z) % a.P, g[1], g[2]};
  return static_cast<int>(blockIdx.y) * tile_rows < b.rows;
}
// Every active expert's projections on the mma.sync tiles (linear_tiled.cu), for calls whose
// experts hold many rows (prefill chunks): BF16 weights, xb the grouped rows in bf16 ([n][K]),
// S pieces of a.Ks k. Each expert's rows get bitwise linear() of those rows (the tiles' K walk).
// max_rows: at least the most rows one expert has; slots: at least the active experts.
void launch_tiled_experts(const ExpertArgs& a, const uint16_t* xb, int S, int max_rows, int slots);

// The wgmma kernel (linear_wgmma.cu, sm_90a): usable on this device (and not switched off by
// LOCKSTEP_CUDA_WGMMA=0); usable for these operands (TMA needs 16-byte aligned bases and rows);
// launch (tile: 0 picks, 4 = 128 x 128 tokens, 5 = 128 x 192, 6 / 7 the same on a persistent grid;
// LOCKSTEP_CUDA_WGMMA_TILE=4..7 replaces the pick, for benchmarks).
bool wgmma_available();
bool wgmma_fits(const Group& g, const uint16_t* x, int K);
void launch_wgmma(const Group& g, const uint16_t* x, int M, int K, int S, int tile);
// The tile launch_wgmma picks for M tokens (4..9, see there).
int pick_wgmma_tile(const Group& g, int M, int S);
// 16 < M <= 64 (batched decode, verify blocks): whether the wgmma kernel (SPLIT tiles where the
// weight has pieces; launched through launch_tiled) runs instead of the skinny kernel: a forced
// tile 8 / 9, LOCKSTEP_CUDA_BATCH_LINEAR, else the measured rule. The bits are the same either way.
bool wgmma_for_batch(const Group& g, const uint16_t* x, int M, int K, int S);

}  // namespace lockstep::kernels::cuda::lin
