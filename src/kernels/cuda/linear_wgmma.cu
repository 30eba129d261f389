// linear (cuda_ops.h), the Hopper tiled kernel for M > 64 (prefill): the same K walk as every
// other linear kernel (linear.cu states it), on wgmma instead of mma.sync. Built for sm_90a only
// (CMakeLists.txt); elsewhere launch_wgmma is never called (wgmma_available() is false).
//
// Why the bits are the same as the mma.sync kernels': a chain of wgmma.m64nNk16 BF16 -> FP32 steps
// gives bitwise the FP32 results of the chain of mma.sync.m16n8k16 steps over the same k-steps in
// the same order from the same accumulator, for every N tried (tools/cuda/wgmma_probe.cu, run on
// the H200; tests/cuda/linear_test.cpp checks this kernel's rows against M = 1 on every shape).
// So each piece's accumulator starts at +0 (registers zeroed, scale-d = 1) and receives exactly its
// k/16 steps in increasing k; the pieces are merged in piece order and the bias added last:
// y = ((a0 + a1) + a2) + a3 (+ bias), one __fadd_rn each, as the skinny and tiled kernels do.
//
// Block (persistent by default: one per multiprocessor walking tiles; or one tile per block):
// 128 weight rows (the wgmma's M: two consumer warpgroups of 64 rows) x BM tokens (its N),
// 64 k per stage, STAGES deep, plus one producer warpgroup. The producer's one thread loads each
// stage with two TMA boxes (weights 128 x 64 k, x BM x 64 k; 128-byte swizzle; rows and k outside
// the tensors read 0) completing on the stage's "full" mbarrier; consumers wait on it, run the
// stage's k16 steps of the current piece (a piece's last stage may hold fewer; none is padded),
// keep one wgmma group in flight and release the stage before it on its "empty" mbarrier. Unlike
// the mma.sync tiled kernel (which adds each piece into y), the piece sum is kept in registers
// (a second set beside the accumulators, BM / 2 floats each per thread): y is written once, at the
// end. Blocks run in groups of kGroupRows row blocks over all token blocks, so a wave's weights
// and x stay in L2.
#include <cuda.h>  // CUtensorMap and its enums (the encoder is fetched from the driver at run time)

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cuda/linear_internal.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace lockstep::kernels::cuda::lin {
namespace {

constexpr int kWK = 64;          // k per stage: one 128-byte swizzle row of bf16
constexpr int kWRows = 128;      // weight rows per block (2 consumer warpgroups x 64)
constexpr int kGroupRows = 8;    // row blocks per raster group (L2 reuse)
constexpr int kSplitSlot = 2;    // detail::scratch slot of the SPLIT pieces' sums

template <int BM, int STAGES>
struct WgCfg {
  static constexpr int kThreads = 384;  // warpgroup 0: producer; 1, 2: consumers
  static constexpr int kABytes = kWRows * kWK * 2;
  static constexpr int kBBytes = BM * kWK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kBarOff = STAGES * kStageBytes;               // full[STAGES], empty[STAGES]
  static constexpr int kSmem = 1024 + kBarOff + 2 * STAGES * 8;      // + alignment slack
  static_assert(BM % 16 == 0 && BM <= 256 && kStageBytes % 1024 == 0, "wgmma tile");
};

// The tensor maps of one launch: each weight ([N][K] bf16) and x ([M][K] bf16).
struct Maps {
  CUtensorMap w[kMaxOuts];
  CUtensorMap x;
};

// Where a SPLIT launch leaves its pieces' sums: part[p][m][c], c = col[wi] + n over the launch's
// weights side by side (ntot columns in all).
struct SplitOut {
  float* part;
  int col[kMaxOuts];
  int ntot;
};

// Tile `id` of the launch (raster: groups of kGroupRows row blocks, of all weights in table order,
// x every token block, so the blocks running at once share weights and x in L2).
struct TileAt {
  int wi, bx, n0, m0;  // weight index, its row block, first weight row, first token
};
template <int BM, bool MULTI>
__device__ __forceinline__ TileAt tile_at(const Outs& outs, int id, int row_blocks, int tok_blocks) {
  const int per_group = kGroupRows * tok_blocks;
  const int grp = id / per_group, first = grp * kGroupRows;
  const int gsize = min(kGroupRows, row_blocks - first);
  const int rb = first + (id - grp * per_group) % gsize;
  const int tb = (id - grp * per_group) / gsize;
  int wi = 0;
  if constexpr (MULTI) {
#pragma unroll
    for (int i = 1; i < kMaxOuts; ++i)
      if (i < outs.n && rb >= outs.end[i - 1]) wi = i;
  }
  const int bx = wi == 0 ? rb : rb - outs.end[wi - 1];
  return {wi, bx, bx * kWRows, tb * BM};
}

// PERSIST: one block per multiprocessor walks tiles blockIdx.x, + gridDim.x, ...; the stage ring
// and its barrier phases run on across tiles, so the producer loads the next tile while the
// consumers finish this one. Otherwise one tile per block.
//
// SPLIT (batched decode, few row blocks): a tile is (row block, token block, piece) and walks one
// piece; its FP32 sum goes to the piece's slice of `split.part` (no bias), and merge_pieces adds
// the slices in piece order and the bias: the same ((a0 + a1) + a2) + a3 (+ bias), each piece
// summed from +0 over its own k-steps, so the bits equal the unsplit kernel's. It exists because a
// 4096-row weight has only 32 row blocks of 128: unsplit, a decode batch of up to 128 tokens keeps
// 32 of 132 multiprocessors busy; split, S times as many.
template <int BM, int STAGES, bool MULTI, bool PERSIST, bool SPLIT>
__global__ void __launch_bounds__(384, 1)
    linear_wgmma(const __grid_constant__ Outs outs, const __grid_constant__ Maps maps,
                 const __grid_constant__ SplitOut split, int M, int K, int Ks, int S,
                 int row_blocks, int tok_blocks) {
  using C = WgCfg<BM, STAGES>;
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t base = raw + ((1024 - (raw & 1023)) & 1023);  // the swizzle needs 1024-B atoms
  const uint32_t full0 = base + C::kBarOff, empty0 = full0 + STAGES * 8;
  const int tid = threadIdx.x, wg = tid >> 7;
  const int SP = SPLIT ? S : 1;  // tiles per (row block, token block)
  const int tiles = PERSIST ? row_blocks * tok_blocks * SP : static_cast<int>(blockIdx.x) + 1;
  const int tile_step = PERSIST ? static_cast<int>(gridDim.x) : 1;
  const int nkp = (Ks + kWK - 1) / kWK;  // stages per piece
  const int nk = SPLIT ? nkp : S * nkp;  // stages per tile

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, 8);  // one arrival per consumer warp
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    // Producer: one thread issues every stage's two boxes; q counts stages over all tiles.
    setmaxnreg_dec<40>();
    if (tid == 0) {
      tma_prefetch_desc(&maps.x);
      int q = 0;
      for (int id = blockIdx.x; id < tiles; id += tile_step) {
        const TileAt tl = tile_at<BM, MULTI>(outs, SPLIT ? id / S : id, row_blocks, tok_blocks);
        const CUtensorMap* wmap = &maps.w[tl.wi];
        for (int kc = 0; kc < nk; ++kc, ++q) {
          const int s = q % STAGES, round = q / STAGES;
          if (round > 0) mbar_wait(empty0 + 8 * s, (round - 1) & 1);
          const int p = SPLIT ? id % S : kc / nkp;
          const int k0 = p * Ks + (SPLIT ? kc : kc - p * nkp) * kWK;
          const uint32_t sa = base + s * C::kStageBytes;
          mbar_arrive_tx(full0 + 8 * s, C::kStageBytes);
          tma_load_2d(sa, wmap, full0 + 8 * s, k0, tl.n0);
          tma_load_2d(sa + C::kABytes, &maps.x, full0 + 8 * s, k0, tl.m0);
        }
      }
    }
    return;
  }

  // Consumers: warpgroup c (0, 1) owns weight rows [64 c, 64 c + 64) of the block.
  setmaxnreg_inc<232>();
  const int c = wg - 1, lane = tid & 31, wq = (tid >> 5) & 3;
  const int g = lane >> 2, t = lane & 3;
  constexpr int R = BM / 2;  // accumulator registers per thread
  float acc[R], sum[R];
#pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = 0.0f, sum[i] = 0.0f;

  int q = 0;
  for (int id = blockIdx.x; id < tiles; id += tile_step) {
    const int p_first = SPLIT ? id % S : 0;  // the tile's (first) piece
    int p = p_first, cc = 0, prev = -1;  // piece, stage within it; stage whose wgmmas may still run
    for (int kc = 0; kc < nk; ++kc, ++q) {
      const int s = q % STAGES;
      mbar_wait(full0 + 8 * s, (q / STAGES) & 1);
      const uint32_t sa = base + s * C::kStageBytes + c * 64 * 128, sb = base + s * C::kStageBytes + C::kABytes;
      const int k0 = p * Ks + cc * kWK;
      const int steps = max(0, min(kWK, min(K, p * Ks + Ks) - k0)) / 16;
      wgmma_fence_regs(acc);
      wgmma_fence();
      if (steps == kWK / 16) {  // the common case without branches between the MMAs
#pragma unroll
        for (int st = 0; st < kWK / 16; ++st)
          Wgmma<BM>::mma(acc, wgmma_desc_sw128(sa + 32 * st), wgmma_desc_sw128(sb + 32 * st));
      } else {  // a piece's short last stage
#pragma unroll
        for (int st = 0; st < kWK / 16; ++st)
          if (st < steps) Wgmma<BM>::mma(acc, wgmma_desc_sw128(sa + 32 * st), wgmma_desc_sw128(sb + 32 * st));
      }
      wgmma_commit();
      if (++cc == nkp) {
        // Piece p done: wait for all its steps, release its stages, merge, restart from +0.
        wgmma_wait<0>();
        wgmma_fence_regs(acc);
        if (lane == 0) {
          if (prev >= 0) mbar_arrive(empty0 + 8 * prev);
          mbar_arrive(empty0 + 8 * s);
        }
        prev = -1;
        if (p == p_first) {
#pragma unroll
          for (int i = 0; i < R; ++i) sum[i] = acc[i];
        } else {
#pragma unroll
          for (int i = 0; i < R; ++i) sum[i] = __fadd_rn(sum[i], acc[i]);
        }
#pragma unroll
        for (int i = 0; i < R; ++i) acc[i] = 0.0f;
        ++p, cc = 0;
      } else {
        // One group in flight: the stage before this one is done and goes back to the producer.
        wgmma_wait<1>();
        wgmma_fence_regs(acc);
        if (prev >= 0 && lane == 0) mbar_arrive(empty0 + 8 * prev);
        prev = s;
      }
    }

    // y = sum (+ bias). Register r: weight row 16 wq + g + 8 ((r / 2) % 2) of the warpgroup's
    // 64, token 8 (r / 4) + 2 t + r % 2 of the block's BM. (Every stage is released by now: a
    // tile ends with a piece's end.)
    const TileAt tl = tile_at<BM, MULTI>(outs, SPLIT ? id / S : id, row_blocks, tok_blocks);
    const int N = outs.N[tl.wi];
    const int nb = tl.n0 + c * 64 + wq * 16 + g, mb = tl.m0 + 2 * t;
    if constexpr (SPLIT) {
      // The piece's slice: part[p][m][col[wi] + n], no bias (merge_pieces adds it last).
      float* __restrict__ part =
          split.part + static_cast<int64_t>(p_first) * M * split.ntot + split.col[tl.wi];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int n = nb + 8 * ((r / 2) % 2), m = mb + 8 * (r / 4) + r % 2;
        if (n < N && m < M) part[static_cast<int64_t>(m) * split.ntot + n] = sum[r];
      }
      continue;
    }
    const float* __restrict__ bias = outs.bias[tl.wi];
    float* __restrict__ y = outs.y[tl.wi];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int n = nb + 8 * ((r / 2) % 2), m = mb + 8 * (r / 4) + r % 2;
      if (n < N && m < M) {
        float v = sum[r];
        if (bias) v = __fadd_rn(v, bias[n]);
        y[static_cast<int64_t>(m) * N + n] = v;
      }
    }
  }
}

// y[m][n] = ((part[0] + part[1]) + part[2]) + part[3] (+ bias[n]), one __fadd_rn each, in piece
// order: what the unsplit kernel computes in registers.
__global__ void merge_pieces(const __grid_constant__ Outs outs, const __grid_constant__ SplitOut split,
                             int M, int S) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t plane = static_cast<int64_t>(M) * split.ntot;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= plane) return;
  const int m = static_cast<int>(i / split.ntot), c = static_cast<int>(i % split.ntot);
  int wi = 0;
#pragma unroll
  for (int j = 1; j < kMaxOuts; ++j)
    if (j < outs.n && c >= split.col[j]) wi = j;
  const int n = c - split.col[wi];
  float v = sum_pieces(split.part, plane, i, S);
  if (outs.bias[wi]) v = __fadd_rn(v, outs.bias[wi][n]);
  outs.y[wi][static_cast<int64_t>(m) * outs.N[wi] + n] = v;
}

// --- host: tensor maps ----------------------------------------------------------------------------
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                 CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                 CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled from the driver (the library links no libcuda; the runtime hands out the
// driver's entry points). Null when the driver lacks it.
EncodeTiled encoder() {
  static const EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

// A [rows][K] bf16 matrix read in boxes of `box_rows` rows x 64 k, 128-byte swizzled.
CUtensorMap make_map(const void* ptr, int64_t rows, int64_t K, int box_rows) {
  CUtensorMap m;
  std::memset(&m, 0, sizeof m);
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(K) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kWK), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem[2] = {1, 1};
  const CUresult r = encoder()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(ptr), dims, strides,
                               box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) fail("CUDA linear: cuTensorMapEncodeTiled failed (" + std::to_string(static_cast<int>(r)) + ")");
  return m;
}

template <int BM, int STAGES, bool MULTI, bool PERSIST, bool SPLIT>
void launch_wg3(const Group& g, const uint16_t* x, int M, int K, int S) {
  using C = WgCfg<BM, STAGES>;
  constexpr auto kernel = linear_wgmma<BM, STAGES, MULTI, PERSIST, SPLIT>;
  allow_smem<kernel>(C::kSmem);
  SplitOut split;
  std::memset(&split, 0, sizeof split);
  if (SPLIT) {
    for (int i = 0, c = 0; i < g.o.n; c += g.o.N[i], ++i) split.col[i] = c;
    split.ntot = g.total_n;
    split.part = static_cast<float*>(
        scratch(kSplitSlot, static_cast<size_t>(S) * M * g.total_n * sizeof(float)));
  }
  Maps maps;
  std::memset(&maps, 0, sizeof maps);
  for (int i = 0; i < g.o.n; ++i) maps.w[i] = make_map(g.o.w[i], g.o.N[i], K, kWRows);
  maps.x = make_map(x, M, K, BM);
  const int row_blocks = g.blocks(kWRows), tok_blocks = (M + BM - 1) / BM;
  const int tiles = row_blocks * tok_blocks * (SPLIT ? S : 1);
  const int grid = PERSIST ? std::min(tiles, sm_count()) : tiles;
  const int Ks = split_len(K, S);
  const Outs table = g.table(kWRows);
  launch("linear (wgmma kernel)", kernel, dim3(grid), C::kThreads, C::kSmem, table, maps, split, M,
         K, Ks, S, row_blocks, tok_blocks);
  if (SPLIT) {
    const int64_t plane = static_cast<int64_t>(M) * g.total_n;
    launch("linear (merge pieces)", merge_pieces, dim3(static_cast<unsigned>((plane + 255) / 256)),
           256, 0, table, split, M, S);
  }
}

template <int BM, int STAGES, bool PERSIST, bool SPLIT = false>
void launch_wg(const Group& g, const uint16_t* x, int M, int K, int S) {
  if (g.o.n > 1) launch_wg3<BM, STAGES, true, PERSIST, SPLIT>(g, x, M, K, S);
  else launch_wg3<BM, STAGES, false, PERSIST, SPLIT>(g, x, M, K, S);
}

}  // namespace

bool wgmma_available() {
  // sm_90a code runs on compute capability 9.0 only (device_caps.h also honours
  // LOCKSTEP_CUDA_WGMMA=0 and LOCKSTEP_CUDA_AS_CC).
  static const bool ok = device_caps().wgmma && encoder() != nullptr;
  return ok;
}

bool wgmma_fits(const Group& g, const uint16_t* x, int K) {
  // TMA: 16-byte aligned bases and row strides.
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  if (K % 8 != 0 || !aligned(x)) return false;
  for (int i = 0; i < g.o.n; ++i)
    if (!aligned(g.o.w[i])) return false;
  return true;
}

// tile: 0 = pick; 4 / 5 = 128 x 128 / 128 x 192 tokens, one tile per block; 6 / 7 the same tiles
// on a persistent grid; 8 / 9 = SPLIT tiles of 64 / 128 tokens (one piece each), persistent. The
// pick: persistent (H200, linear-prefill: 0-12% faster than one tile per block on 12 of 14 shapes,
// within noise on the rest), and the tile with the fewer waves x tokens per tile, a 192-token tile
// counting as 1.15 of a 128-token one's rate (192 is 5-20% faster per tile on large shapes, slower
// where it leaves the machine under one wave); that rule picked the faster persistent tile on all
// 14 measured shapes. Where the unsplit tiles would leave most multiprocessors idle (batched
// decode on a weight of few row blocks) and the weight has pieces, SPLIT tiles. Free choices all:
// the bits do not depend on them (tests force each).
void launch_wgmma(const Group& g, const uint16_t* x, int M, int K, int S, int tile) {
  // LOCKSTEP_CUDA_WGMMA_TILE=4..9 forces a tile for whole-engine benchmarks (same bits).
  static const int env_tile = [] {
    const char* e = std::getenv("LOCKSTEP_CUDA_WGMMA_TILE");
    const int v = e ? std::atoi(e) : 0;
    return v >= 4 && v <= 9 ? v : 0;
  }();
  if (tile == 0) tile = env_tile;
  if ((tile == 8 || tile == 9) && S == 1) tile = 0;  // one piece: nothing to split
  if (tile == 0) tile = pick_wgmma_tile(g, M, S);
  if (tile == 5) launch_wg<192, 5, false>(g, x, M, K, S);
  else if (tile == 6) launch_wg<128, 6, true>(g, x, M, K, S);
  else if (tile == 7) launch_wg<192, 5, true>(g, x, M, K, S);
  else if (tile == 8) launch_wg<64, 8, true, true>(g, x, M, K, S);
  else if (tile == 9) launch_wg<128, 6, true, true>(g, x, M, K, S);
  else launch_wg<128, 6, false>(g, x, M, K, S);
}

int pick_wgmma_tile(const Group& g, int M, int S) {
  // H200, cuda_bench linear-batch (Qwen3-8B decode linears, M = 16..256): where the unsplit grid
  // fills at most half the multiprocessors and the weight has pieces, SPLIT tiles of 128 tokens
  // beat the unsplit ones by 6-25% (q/k/v, o_proj and down at M = 96..256; the 64-token tiles were
  // slower there on all but one shape, within 3%); below 64 tokens the 64-token tile.
  const int64_t sms = sm_count(), rows = g.blocks(kWRows);
  if (S > 1 && M <= 64) return 8;
  if (S > 1 && rows * ((M + 127) / 128) * 2 <= sms) return 9;
  auto waves = [&](int bm) { return (rows * ((M + bm - 1) / bm) + sms - 1) / sms; };
  auto cost = [&](int bm, double rate) { return static_cast<double>(waves(bm)) * bm / rate; };
  return cost(192, 1.15) < cost(128, 1.0) ? 7 : 6;
}

}  // namespace lockstep::kernels::cuda::lin
