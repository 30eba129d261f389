// The skinny linear kernel (M <= 64: decode and speculative verify; linear.cu states the schedule)
// and its launch, shared by the BF16 launches (linear.cu, QB = 0) and the quantized ones
// (linear_quant.cu, QB = 4 or 8). Both feed the MMAs from the same swizzled BF16 weight tile by
// ldmatrix; only where that tile comes from differs:
// - QB = 0: the tile IS the ring slot: cp.async copies the BF16 weight rows into it.
// - QB = 4 / 8: the ring slot holds the stage's raw codes (ROWS rows of BK * QB / 8 bytes, as
//   stored) and the scale/bias pairs of the groups the stage touches; the piece's threads then
//   dequantize it cooperatively into one of two BF16 tiles (one thread = one 16-byte chunk = 8
//   elements of one row, all in one group: dequant8, linear_quant.cuh), laid out exactly as the
//   QB = 0 tile. Stage j is dequantized in iteration j - 1 (by every warp of the piece: the row
//   tiles' MMA warps before their MMAs of stage j - 1 from the other tile, and DQ - 1 extra
//   warps per tile that only load and dequantize), and used in iteration j. The k-steps, the MMA
//   operands, the merge and
//   the stores are one code path, so the quantized result is bitwise the BF16 result of the
//   dequantized matrix.
#pragma once

#include <algorithm>

#include "kernels/cuda/linear_internal.cuh"
#include "kernels/cuda/linear_quant.cuh"

namespace lockstep::kernels::cuda::lin {

// 4 bytes global -> shared, asynchronously; zero-filled when !valid (the scale/bias pairs, which
// are only 4-byte aligned).
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(n)
               : "memory");
}

// --- skinny: M <= 64 ------------------------------------------------------------------------------
// Block: S pieces x WR warps; warp (piece p, r) owns weight rows [16 r, 16 r + 16) of the block's
// 16 WR and walks piece p's k, BK k per stage through a cp.async ring of STAGES stages (each piece's
// 32 WR threads load and wait on only their piece's part, so pieces sync on their own barrier).
// WR, BK and STAGES are free choices: the k-steps, the MMA operands and the merge are the same for
// every config.
// DQ (quantized only): warps per row tile of a piece; the DQ - 1 extra ones only load and
// dequantize (they hold no accumulators), so the ALU-bound dequantization has DQ times the warps
// to hide its latency without more rows (or shared memory) per block.
// SMALL: a config for devices with less shared memory than Hopper's (kSmallSmemCode, common.cuh).
template <int WR_, int BK_, int STAGES_, int DQ_ = 1, bool SMALL_ = false>
struct SkCfg {
  static constexpr int WR = WR_, BK = BK_, STAGES = STAGES_, DQ = DQ_;
  static constexpr bool SMALL = SMALL_;
};

template <int MT, bool XF32, int S, typename CF, int QB = 0>
struct Skinny {
  static constexpr int kWR = CF::WR, kBK = CF::BK, kStages = CF::STAGES, kDQ = CF::DQ;
  static constexpr int kRows = 16 * kWR;           // weight rows per block
  static constexpr int kPT = 32 * kWR * kDQ;       // threads per piece
  static constexpr int kThreads = kPT * S;
  // Kernels with dequant warps are held to 128 registers (512 threads a block, or 2 or 4 blocks
  // of 256 or 128 threads a multiprocessor), so the shared memory, not the register file, sets
  // occupancy.
  static constexpr int kMinBlocks = kDQ == 1 ? 1 : (kThreads >= 512 ? 1 : 512 / kThreads);
  static constexpr int kWBytes = kRows * kBK * 2;  // a BF16 weight tile of one piece and stage
  // Quantized staging of one piece and stage: the codes, then kNP pair slots per row (the groups
  // a stage of BK k can touch, for power-of-two groups of at least 32: see load_w).
  static constexpr int kCodeBytes = kRows * kBK * QB / 8;
  static constexpr int kNP = kBK / 32 + 1;
  static constexpr int kRingW = QB == 0 ? kWBytes : kCodeBytes + kRows * kNP * 4;
  static constexpr int kXStride = kBK + 8;         // floats per FP32 x row (conflict-free float2)
  // x of one piece in one stage: the call's xr tokens as FP32 rows (M <= 16), or 8 MT bf16 rows
  // (ldmatrix reads all of them; rows past M are zero-filled).
  __host__ __device__ static constexpr int x_bytes(int xr) { return XF32 ? xr * kXStride * 4 : 8 * MT * kBK * 2; }
  __host__ __device__ static constexpr int piece_bytes(int xr) { return kRingW + x_bytes(xr); }
  static constexpr int kTileBytes = QB == 0 ? 0 : S * 2 * kWBytes;  // the two BF16 tiles
  static constexpr int kReduceBytes = (S - 1) * kWR * MT * 4 * 32 * 4;
  __host__ __device__ static constexpr int smem(int xr) {
    const int pipe = kStages * S * piece_bytes(xr) + kTileBytes;
    return pipe > kReduceBytes ? pipe : kReduceBytes;
  }
  static_assert(kBK % 16 == 0 && kStages >= 2 && (kRows * (kBK / 8)) % kPT == 0, "skinny config");
  // Quantized: a 16-byte code chunk holds 128 / QB k, a stage whole chunks; the ring needs a third
  // stage (the one being dequantized sits between the one read and the ones in flight).
  static_assert(QB == 0 || ((kBK * QB) % 128 == 0 && kBK % 32 == 0 && kStages >= 3),
                "quantized skinny config");
  static_assert(QB != 0 || kDQ == 1, "dequant warps are for quantized weights");
};

// Stages FP32 x for one stage: the call's xr token rows m0.. of x [M][K], k in [k0, k0 + BK), as
// 16-byte cp.asyncs into rows `stride` floats apart at shared address xs; k past kend zero-filled.
// Thread tid of the NT that stage it. The skinny and the warp-specialized kernels both stage so.
// xrows (null: none) names the rows instead: token row m is x's row xrows[m] (the grouped expert
// linear reads its tokens where they are rather than a gathered copy: the same values).
template <int BK, int NT>
__device__ __forceinline__ void stage_x_f32(uint32_t xs, int stride, const float* x, int m0, int K,
                                            int k0, int kend, int xr, int tid,
                                            const int32_t* xrows = nullptr) {
  constexpr int kCpr = BK / 4;  // 16-byte chunks per x row
  for (int idx = tid; idx < xr * kCpr; idx += NT) {
    const int r = idx / kCpr, c = idx % kCpr;
    const int gk = k0 + c * 4;
    const bool ok = gk < kend;
    const int64_t row = xrows ? xrows[m0 + r] : m0 + r;
    const float* src = ok ? x + row * K + gk : x;
    cp_async16(xs + (r * stride + c * 4) * 4, src, ok);
  }
}

// The B operands of one k-step for the MT token tiles from FP32 x rows staged `stride` floats
// apart (this k-step's 16 columns at row + 0), rounded to BF16 as the schedule fixes: lane (g, t)
// takes columns 2t, 2t + 1 (b[j][0]) and 2t + 8, 2t + 9 (b[j][1]) of token row 8 j + g. Tokens
// past the call's xr rows are not staged: their operand is bf16 zero, what a zero-filled row
// rounds to (and their outputs are not stored). The skinny and the warp-specialized kernels
// both build their FP32-x operands here.
template <int MT>
__device__ __forceinline__ void x_f32_fragments(const float* xf, int stride, int xr, int g, int t,
                                                uint32_t (&b)[MT][2]) {
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    b[j][0] = b[j][1] = 0u;
    if (j * 8 + g < xr) {
      const float* row = xf + (j * 8 + g) * stride + 2 * t;
      const float2 v0 = *reinterpret_cast<const float2*>(row);
      const float2 v1 = *reinterpret_cast<const float2*>(row + 8);
      b[j][0] = pack_bf16x2(v0.x, v0.y);
      b[j][1] = pack_bf16x2(v1.x, v1.y);
    }
  }
}

// The end of every skinny kernel (the BF16 and both quantized ones): pieces 1.. hand their
// accumulators to piece 0 through shared memory, piece 0 adds them in piece order
// (((a0 + a1) + a2) + a3, the merge linear.cu's schedule fixes), adds the bias and stores the
// block's outputs. One copy, so every skinny kernel merges alike. All the block's threads call it
// once every warp is past the pipeline (cp_async_wait<0>): the S > 1 barriers are block-wide.
// Warps that hold no accumulators (mma_warp false), and pieces 1.., store nothing.
template <int MT, int S, int WR>
__device__ __forceinline__ void skinny_merge_store(uint8_t* smem, float (&acc)[MT][4], int piece,
                                                   int wrow, bool mma_warp, int n0, int m0, int N,
                                                   int M, const float* __restrict__ bias,
                                                   float* __restrict__ y) {
  const int lane = threadIdx.x & 31;
  if constexpr (S == 1) {
    if (!mma_warp) return;
  } else {
    __syncthreads();  // every warp is done with the pipeline's shared memory
    float* red = reinterpret_cast<float*>(smem);
    auto slot = [&](int p, int j, int e) {
      return (((p - 1) * WR + wrow) * MT + j) * 4 * 32 + e * 32 + lane;
    };
    if (piece > 0 && mma_warp) {
#pragma unroll
      for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) red[slot(piece, j, e)] = acc[j][e];
    }
    __syncthreads();
    if (piece > 0 || !mma_warp) return;
#pragma unroll
    for (int p = 1; p < S; ++p)
#pragma unroll
      for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] = __fadd_rn(acc[j][e], red[slot(p, j, e)]);
  }
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < MT; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int n = n0 + wrow * 16 + g + (e >> 1) * 8;
      const int m = m0 + j * 8 + 2 * t + (e & 1);
      if (n < N && m < M) {
        float v = acc[j][e];
        if (bias) v = __fadd_rn(v, bias[n]);
        y[static_cast<int64_t>(m) * N + n] = v;
      }
    }
  }
}

// sb, lg, pair_fmt: the quantized weight's scale/bias pairs (linear_quant.cuh), log2 of its group
// size (a power of two >= 32) and pair format (kPairBF16 / kPairF16); unused for QB = 0. A
// quantized launch has one weight.
// xrows (FP32 x only; null: none): token row m of the call is x's row xrows[m] (stage_x_f32).
template <int MT, bool XF32, int S, typename CF, int QB>
__device__ __forceinline__ void skinny_body(const Outs& outs, const void* __restrict__ xv, int M,
                                            int K, int Ks, const uint32_t* __restrict__ sb,
                                            int lg, int pair_fmt,
                                            const int32_t* __restrict__ xrows = nullptr) {
  using C = Skinny<MT, XF32, S, CF, QB>;
  constexpr int BK = C::kBK, STAGES = C::kStages, PT = C::kPT, ROWS = C::kRows;
  extern __shared__ __align__(128) uint8_t smem[];
  const Out1 o = pick<true>(outs);
  const uint16_t* __restrict__ w = o.w;
  const float* __restrict__ bias = o.bias;
  float* __restrict__ y = o.y;
  const int N = o.N;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Warp (piece, wrow) with wrow < WR owns row tile wrow and its MMAs; wrow >= WR (DQ > 1) only
  // loads and dequantizes.
  const int piece = warp / (C::kWR * C::kDQ), wrow = warp % (C::kWR * C::kDQ);
  const bool mma_warp = wrow < C::kWR;
  const int ptid = tid - piece * PT;  // thread index within the piece's warps
  const int n0 = o.bx * ROWS;
  const int m0 = blockIdx.y * 8 * MT;
  const int xr = XF32 ? min(8 * MT, M - m0) : 8 * MT;  // x rows staged per stage
  const int piece_bytes = C::piece_bytes(xr);
  const int stage_bytes = S * piece_bytes;
  const int kbeg = piece * Ks, kend = min(K, kbeg + Ks);
  const int nk = (Ks + BK - 1) / BK;  // stages (the same for every piece)
  const uint32_t base = smem_addr(smem);
  // Quantized: the piece's two BF16 tiles, after the ring.
  const int tiles_off = STAGES * stage_bytes + piece * 2 * C::kWBytes;

  // The piece's threads load the piece's BK k of the stage: weights (load_w), then x (load_x).
  auto load_w = [&](int stage, int chunk) {
    const uint32_t ws = base + stage * stage_bytes + piece * piece_bytes;
    const int k0 = kbeg + chunk * BK;
    if constexpr (QB == 0) {
#pragma unroll
      for (int i = 0; i < ROWS * (BK / 8) / PT; ++i) {
        const int idx = ptid + PT * i, r = idx / (BK / 8), c = idx % (BK / 8);
        const int gk = k0 + c * 8;
        const bool ok = (n0 + r < N) && (gk < kend);
        const uint16_t* src = ok ? w + static_cast<int64_t>(n0 + r) * K + gk : w;
        cp_async16(ws + swz(r, c, BK * 2), src, ok);
      }
    } else {
      // Codes: row r's BK * QB / 8 bytes from byte k0 * QB / 8 of its row, in 16-byte chunks of
      // 128 / QB k (the launch checked that rows and piece starts are 16-byte aligned).
      constexpr int kCC = BK * QB / 128;  // chunks per row and stage
      const uint8_t* codes = reinterpret_cast<const uint8_t*>(w);
      const int64_t row_bytes = static_cast<int64_t>(K) * QB / 8;
      constexpr int kCodeChunks = ROWS * kCC;
#pragma unroll
      for (int i = 0; i < (kCodeChunks + PT - 1) / PT; ++i) {
        const int idx = ptid + PT * i, r = idx / kCC, c = idx % kCC;
        if (kCodeChunks % PT == 0 || idx < kCodeChunks) {
          const int gk = k0 + c * (128 / QB);
          const bool ok = (n0 + r < N) && (gk < kend);
          const uint8_t* src = ok ? codes + (n0 + r) * row_bytes + gk * QB / 8 : codes;
          cp_async16(ws + r * (BK * QB / 8) + c * 16, src, ok);
        }
      }
      // Pairs: the groups [g0, g0 + np) that [k0, k0 + BK) touches, of each row, into its kNP
      // slots. k0 is a multiple of 16 and G = 2^lg >= 32, so np <= (G - 16 + BK - 1) / G + 1 <=
      // BK / 32 + 1 = kNP; the piece's last, shorter stage stops at the row's last group.
      const int gpr = K >> lg, g0 = k0 >> lg;
      const int np = min((((k0 & ((1 << lg) - 1)) + BK - 1) >> lg) + 1, gpr - g0);
      const uint32_t ps = ws + C::kCodeBytes;
      constexpr int kPairSlots = ROWS * C::kNP;
#pragma unroll
      for (int i = 0; i < (kPairSlots + PT - 1) / PT; ++i) {
        const int idx = ptid + PT * i, r = idx / C::kNP, j = idx % C::kNP;
        if ((kPairSlots % PT == 0 || idx < kPairSlots) && j < np) {
          const bool ok = n0 + r < N;
          const uint32_t* src = ok ? sb + static_cast<int64_t>(n0 + r) * gpr + g0 + j : sb;
          cp_async4(ps + idx * 4, src, ok);
        }
      }
    }
  };
  auto load_x = [&](int stage, int chunk) {
    const uint32_t xs = base + stage * stage_bytes + piece * piece_bytes + C::kRingW;
    const int k0 = kbeg + chunk * BK;
    if constexpr (XF32) {
      stage_x_f32<BK, PT>(xs, C::kXStride, static_cast<const float*>(xv), m0, K, k0, kend, xr, ptid,
                          xrows);
    } else {
      const uint16_t* x = static_cast<const uint16_t*>(xv);
#pragma unroll
      for (int i = 0; i < 8 * MT * (BK / 8) / PT; ++i) {
        const int idx = ptid + PT * i, r = idx / (BK / 8), c = idx % (BK / 8);
        const int gk = k0 + c * 8;
        const bool ok = (m0 + r < M) && (gk < kend);
        const uint16_t* src = ok ? x + static_cast<int64_t>(m0 + r) * K + gk : x;
        cp_async16(xs + swz(r, c, BK * 2), src, ok);
      }
    }
  };
  // Quantized: the staging of ring slot `stage` (chunk `chunk` of the piece) into BF16 tile `t`,
  // one 16-byte tile chunk (8 elements of one row, one group) per thread and step. Chunks past the
  // piece's end hold stale values: their k-steps are never multiplied (`steps` below).
  auto dequant = [&](int stage, int chunk, int t) {
    if constexpr (QB != 0) {
      const uint8_t* st = smem + stage * stage_bytes + piece * piece_bytes;
      uint8_t* tile = smem + tiles_off + t * C::kWBytes;
      const int k0 = kbeg + chunk * BK, g0 = k0 >> lg;
      const bool f16 = pair_fmt == kPairF16;
#pragma unroll
      for (int i = 0; i < ROWS * (BK / 8) / PT; ++i) {
        const int idx = ptid + PT * i, r = idx / (BK / 8), c = idx % (BK / 8);
        const uint32_t p = *reinterpret_cast<const uint32_t*>(
            st + C::kCodeBytes + (r * C::kNP + ((k0 + c * 8) >> lg) - g0) * 4);
        const float s = half_bits_to_f32(p & 0xffffu, f16), b = half_bits_to_f32(p >> 16, f16);
        uint32_t lo, hi = 0;
        if constexpr (QB == 8) {
          const uint2 v = *reinterpret_cast<const uint2*>(st + r * BK + c * 8);
          lo = v.x, hi = v.y;
        } else {
          lo = *reinterpret_cast<const uint32_t*>(st + r * (BK / 2) + c * 4);
        }
        // A plain store (no asm memory clobber), so the compiler may hoist the next chunks'
        // shared loads above it; the next reader is behind the next iteration's barrier.
        *reinterpret_cast<uint4*>(tile + swz(r, c, BK * 2)) = dequant8<QB>(lo, hi, s, b);
      }
    }
  };
  // The piece's warps meet (the ring's slots are the piece's alone): barrier 1 + piece, named by
  // an immediate so the kernel holds only the barriers it uses.
  auto piece_sync = [&] {
    if constexpr (S == 1) {
      __syncthreads();
    } else {
      if (piece == 0) asm volatile("bar.sync 1, %0;\n" ::"n"(PT) : "memory");
      else if (piece == 1) asm volatile("bar.sync 2, %0;\n" ::"n"(PT) : "memory");
      else if (piece == 2) asm volatile("bar.sync 3, %0;\n" ::"n"(PT) : "memory");
      else asm volatile("bar.sync 4, %0;\n" ::"n"(PT) : "memory");
    }
  };
  static_assert(S == 1 || S == 2 || S == 4, "pieces");

  float acc[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  const int g = lane >> 2, t = lane & 3;
  const int arow = wrow * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;  // A ldmatrix row
  const int acol = lane >> 4;                                       // A ldmatrix k half
  // Stage kc's MMAs: A from the BF16 weight tile at ws, B from the x of ring slot rs, in
  // increasing k. With QB != 0, dequant_next (stage kc + 1 into the other tile) runs first, so
  // its registers are free again before the fragments are loaded (both at once spilled at 128
  // registers); other warps' MMAs overlap it.
  auto mma_stage = [&](uint32_t ws, int rs, int kc, auto&& dequant_next) {
    dequant_next();
    const int soff = rs * stage_bytes + piece * piece_bytes + C::kRingW;
    [[maybe_unused]] const uint32_t xs = base + soff;
    [[maybe_unused]] const float* xf = reinterpret_cast<const float*>(smem + soff);
    const int steps = max(0, min(BK, kend - (kbeg + kc * BK))) / 16;
    uint32_t a[BK / 16][4], b[BK / 16][MT][2];
#pragma unroll
    for (int s = 0; s < BK / 16; ++s) {
      ldmatrix_x4(a[s], ws + swz(arow, s * 2 + acol, BK * 2));
      if constexpr (XF32) {
        x_f32_fragments<MT>(xf + s * 16, C::kXStride, xr, g, t, b[s]);
      } else {
#pragma unroll
        for (int jj = 0; jj < MT / 2; ++jj) {
          uint32_t r4[4];
          const int r = jj * 16 + (lane & 7) + (lane >> 4) * 8;
          ldmatrix_x4(r4, xs + swz(r, s * 2 + ((lane >> 3) & 1), BK * 2));
          b[s][2 * jj][0] = r4[0], b[s][2 * jj][1] = r4[1];
          b[s][2 * jj + 1][0] = r4[2], b[s][2 * jj + 1][1] = r4[3];
        }
      }
    }
    // MMAs in increasing k (fragments past `steps` hold stale data and are not used).
#pragma unroll
    for (int s = 0; s < BK / 16; ++s)
      if (s < steps) {
#pragma unroll
        for (int j = 0; j < MT; ++j) mma_bf16_16816(acc[j], a[s], b[s][j][0], b[s][j][1]);
      }
  };

  // PDL (common.cuh): the first stages' weights (never written by a kernel) are requested before
  // the wait, so they stream in while the previous kernel finishes; x only after it. The first
  // commit group holds every prologue stage's weights and stage 0's x, group st stage st's x:
  // stage st is complete once groups 0..st are, as before.
  pdl_launch_dependents();
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st)
    if (st < nk) load_w(st, st);
  pdl_wait();
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < nk) load_x(st, st);
    cp_async_commit();
  }

  // Iteration kc's refill: stage kc + STAGES - 1 (when there is one) into ring slot ls, as one
  // commit group either way (the waits count groups).
  auto refill = [&](int ls, int kc) {
    const int next = kc + STAGES - 1;
    if (next < nk) {
      load_w(ls, next);
      load_x(ls, next);
    }
    cp_async_commit();
  };
  if constexpr (QB == 0) {
    int rs = 0, ls = STAGES - 1;  // the stage read and the stage loaded in this iteration
    for (int kc = 0; kc < nk; ++kc) {
      cp_async_wait<STAGES - 2>();
      piece_sync();
      refill(ls, kc);
      mma_stage(base + rs * stage_bytes + piece * piece_bytes, rs, kc, [] {});
      rs = rs + 1 == STAGES ? 0 : rs + 1;
      ls = ls + 1 == STAGES ? 0 : ls + 1;
    }
  } else {
    // Stage kc's codes land in ring slot kc % STAGES (commit group kc, as above) and are
    // dequantized into BF16 tile kc % 2 in iteration kc - 1 (stage 0: here, before the loop).
    // Iteration kc: wait for groups 0..kc+1, one piece barrier, issue stage kc + STAGES - 1 into
    // slot (kc - 1) % STAGES, then stage kc's MMAs from tile kc % 2 while stage kc + 1 is
    // dequantized from slot (kc + 1) % STAGES into tile (kc + 1) % 2. The one barrier suffices:
    // - tile kc % 2 was written (iteration kc - 1) before it, and is read after it;
    // - tile (kc + 1) % 2 is written after it; its previous contents (stage kc - 1) were read by
    //   iteration kc - 1's ldmatrix before it, and its new contents are read in iteration kc + 1
    //   after that iteration's barrier;
    // - slot (kc - 1) % STAGES is refilled after it; its previous stage's codes were dequantized
    //   in iteration kc - 2 and its x read in iteration kc - 1, both before it (STAGES >= 3, so
    //   that slot is neither stage kc's nor stage kc + 1's);
    // - stage kc + 1's cp.async data is complete (the wait) and visible (the barrier) before the
    //   dequant reads it.
    cp_async_wait<STAGES - 2>();  // group 0
    piece_sync();
    if (nk > 0) dequant(0, 0, 0);
    int rs = 0, ds = 1 % STAGES, ls = STAGES - 1;  // slots read, dequantized and loaded
    for (int kc = 0; kc < nk; ++kc) {
      cp_async_wait<STAGES - 3>();
      piece_sync();
      refill(ls, kc);
      const int cur = kc & 1;
      auto dequant_next = [&] {
        if (kc + 1 < nk) dequant(ds, kc + 1, cur ^ 1);
      };
      if (mma_warp) mma_stage(base + tiles_off + cur * C::kWBytes, rs, kc, dequant_next);
      else dequant_next();
      rs = rs + 1 == STAGES ? 0 : rs + 1;
      ds = ds + 1 == STAGES ? 0 : ds + 1;
      ls = ls + 1 == STAGES ? 0 : ls + 1;
    }
  }
  cp_async_wait<0>();
  skinny_merge_store<MT, S, C::kWR>(smem, acc, piece, wrow, mma_warp, n0, m0, N, M, bias, y);
}

template <int MT, bool XF32, int S, typename CF, int QB>
__global__ void __launch_bounds__(Skinny<MT, XF32, S, CF, QB>::kThreads,
                                  Skinny<MT, XF32, S, CF, QB>::kMinBlocks)
    linear_skinny(const __grid_constant__ Outs outs, const void* __restrict__ xv, int M, int K,
                  int Ks, const uint32_t* __restrict__ sb, int lg, int pair_fmt) {
  if constexpr (CF::SMALL && !kSmallSmemCode) __trap();  // never launched on sm_90 code
  else skinny_body<MT, XF32, S, CF, QB>(outs, xv, M, K, Ks, sb, lg, pair_fmt);
}

inline int smem_optin() { return device_caps().smem_optin; }

// A skinny kernel may take up to the device's per-block shared memory, and prefers shared memory
// to L1 (its loads bypass L1), once per kernel.
template <auto Kernel>
void allow_smem_max() {
  static const bool done = [] {
    check(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_optin()),
          "linear: set shared memory limit");
    check(cudaFuncSetAttribute(Kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100),
          "linear: set shared memory carveout");
    return true;
  }();
  (void)done;
}

// The quantized side of a skinny launch (QB != 0): the weight's pairs, group size, pair format.
struct SkQuant {
  const uint32_t* sb = nullptr;
  int lg = 5, pair_fmt = kPairBF16;  // log2(group size)
};

// Launches one skinny kernel; false (nothing launched) when its shared memory does not fit.
template <int MT, bool XF32, int S, typename CF, int QB = 0>
bool launch_skinny3(const Group& g, const void* x, int M, int K, int Ks, const SkQuant& q = {}) {
  using C = Skinny<MT, XF32, S, CF, QB>;
  const int bytes = C::smem(XF32 ? std::min(8 * MT, M) : 8 * MT);
  if (bytes > smem_optin()) return false;
  if (CF::SMALL && device_caps().code_arch == 90) return false;  // its body is left out there
  constexpr auto kernel = linear_skinny<MT, XF32, S, CF, QB>;
  allow_smem_max<kernel>();
  const dim3 grid(g.blocks(C::kRows), (M + 8 * MT - 1) / (8 * MT));
  launch(QB == 0 ? "linear (skinny kernel)" : "linear (quantized skinny kernel)", kernel, grid,
         C::kThreads, bytes, g.table(C::kRows), x, M, K, Ks, q.sb, q.lg, q.pair_fmt);
  return true;
}

}  // namespace lockstep::kernels::cuda::lin
