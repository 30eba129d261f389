// The two-pass prefill walk (LOCKSTEP_CUDA_ATTN_WALK=new|new12|new8plain|new12sel), head_dim 64
// and 128: the same per-(row, head) arithmetic as attention.cu's walk (the schedule at the top of
// that file), laid out so that the softmax ALU work of one 32-position step runs beside the MMAs of
// the next, instead of all warps doing all MMAs of a chunk and then all of its exps at once.
//
// Why: the old walk keeps a whole chunk's scores in registers (m_c must be known before any exp),
// 255 registers, 8 warps per multiprocessor, and every warp reaches the chunk's 128 exps per
// thread at the same moment, with the tensor cores idle meanwhile. Here a chunk takes two passes:
// - pass 1: S for the chunk's positions, keeping only the rows' max (m_c; exact in any order);
// - pass 2: S again (the same k-steps in the same order from a zero accumulator: the same bits),
//   e = exp(score - m_c), l, P.V, one sub-tile (kSub positions) at a time, pipelined: the step
//   that computes S of sub-tile t also takes e, l and P.V of sub-tile t - 1, so each warp has
//   independent MMA and ALU work in flight. The last sub-tile's exp and P.V run in the next
//   chunk's first step (beside its first pass-1 MMAs), or after the last chunk.
// 1.5x the q.k MMAs, but a score tile lives for two steps only (about 170 registers, not 255).
// The exp is exp_f32_walk: exp_f32's operations with rintf and the float-to-int conversion (both
// quarter-rate on the multiprocessor) replaced by one add of 1.5 * 2^23, which gives the same
// bits (testing::attention_exp_mismatches checks every one of the 2^32 inputs).
//
// Measured on the H200 (2026-11-29, cuda_bench attention-prefill, Qwen3-8B, causal T = ctx =
// 2048 / 4096): one-pass 525 / 1795 us; two-pass: 8 warps pipelined 705 / 2493, 12 warps 580 /
// 1897, 8 warps not pipelined 695 / 2451. So the one-pass walk stays the default. ncu: every
// variant issues one instruction per 3-4 cycles per scheduler (2-3 warps, 7-8 cycles between a
// warp's instructions, 40% of that a fixed-latency dependency); the two-pass ones issue 13-18%
// more instructions (156M -> 177-184M), and more warps help (12: IPC 1.43, 8: 1.08). Pipelining
// changed nothing, because every exp is its own basic block (exp_f32's early returns are
// branches in the PTX), so the polynomial chains of two elements never interleave. SEL (new12sel,
// and oldsel in attention.cu) takes exp_f32_select instead, with no branch in a sub-tile's exps:
// not yet measured.
//
// Staging: "units" of two sub-tiles (16 KiB): pass 1 takes two key sub-tiles per unit, pass 2
// one key and one value sub-tile (the same positions). A ring of 4 unit slots, 2 units in flight
// by cp.async; a step uses its own unit and the one before it (the values of the previous
// sub-tile), so the slot refilled after step g's barrier is the one of unit g - 2. One barrier
// per unit: kSpc / 2 + kSpc per chunk (12 for head_dim 128; the old walk's 16).
#include "kernels/cuda/attention_internal.cuh"

namespace lockstep::kernels::cuda::attn {
namespace {

// exp_f32 (common.cuh), bit for bit: rintf(t) is (t + 1.5 * 2^23) - 1.5 * 2^23 for |t| < 2^22
// (the sum lies in [2^23, 2^24), spaced by 1, rounded to nearest even; 1.5 * 2^23 is even), and
// the integer is the sum's bits less those of 1.5 * 2^23. Past the range checks |t| <= 150. The
// only difference, n = +0 where rintf gives -0, changes r = fma(n, c, x) only for x = -0, where
// the polynomial still gives exactly 1.
__device__ __forceinline__ float exp_f32_walk(float x) {
  if (isnan(x)) return x;
  if (x > 88.72283935546875f) return __int_as_float(0x7f800000);
  if (x < -103.97208f) return 0.0f;
  const float big = __fadd_rn(__fmul_rn(x, 1.44269504088896341f), 12582912.0f);
  const float n = __fsub_rn(big, 12582912.0f);
  float r = __fmaf_rn(n, -0.693145751953125f, x);
  r = __fmaf_rn(n, -1.428606765330187045e-06f, r);
  float p = 1.0f / 5040.0f;
  p = __fmaf_rn(p, r, 1.0f / 720.0f);
  p = __fmaf_rn(p, r, 1.0f / 120.0f);
  p = __fmaf_rn(p, r, 1.0f / 24.0f);
  p = __fmaf_rn(p, r, 1.0f / 6.0f);
  p = __fmaf_rn(p, r, 0.5f);
  p = __fmaf_rn(p, r, 1.0f);
  p = __fmaf_rn(p, r, 1.0f);
  const int e = __float_as_int(big) - 0x4b400000;
  const int e1 = e / 2, e2 = e - e1;
  return __fmul_rn(__fmul_rn(p, __int_as_float((e1 + 127) << 23)), __int_as_float((e2 + 127) << 23));
}

// Shared memory of one block (byte offsets).
template <int HD, int NW>
struct Walk2Layout {
  static constexpr int kSlots = 4;                                  // unit ring
  static constexpr int kAhead = kSlots - 2;                         // units in flight
  static constexpr int kThreads = NW * 32;
  static constexpr int kUnitBytes = 2 * kSubElems * 2;              // two BF16 sub-tiles
  static constexpr int kRing = 0;
  static constexpr int kQ = kRing + kSlots * kUnitBytes;            // [NW * 16][HD] BF16 q
  static constexpr int kA = kQ + NW * 16 * HD * 2;                  // A, per thread
  static constexpr int kOff = kA + NW * 16 * HD * 4;                // [2][256] int64 offsets
  static constexpr int kBytes = kOff + 2 * kChunk * 8;
  static_assert(kBytes <= 227 * 1024, "shared memory of one block");
};

// Rows t0 .. t0 + nr - 1 of kv head kh (key locations from row tref, the one with the most keys),
// chunks [0, c1): each warp computes its 16 virtual rows, merges every chunk and writes out.
// QREG: the warp's q fragments stay in registers (else ldmatrix from shared memory each k-step).
// PIPE: pass 2's step t takes e and P.V of sub-tile t - 1 beside S of sub-tile t (one warp has
// MMA and ALU work in flight together; 16 more live registers); else all of sub-tile t in its own
// step, and the overlap must come from the other warps.
// SEL: exp_f32_select (no branch per exp), else exp_f32_walk; the same bits.
template <int HD, int NW, bool QREG, bool PIPE, bool SEL>
__device__ void walk2_tiles(uint8_t* smem, const AttnArgs& a, int t0, int nr, int kh, int tref,
                            int c1) {
  using Gm = Geo<HD>;
  using Ly = Walk2Layout<HD, NW>;
  constexpr int kSub = Gm::kSub, kSpc = Gm::kSpc, kKt = Gm::kKt, kNts = Gm::kNts;
  constexpr int kRb = Gm::kRowBytes;
  static_assert(HD <= 128, "one P.V pass over head_dim");
  constexpr int kP1 = kSpc / 2;     // pass-1 units per chunk (two key sub-tiles each)
  constexpr int kNu = kP1 + kSpc;   // units per chunk
  static_assert(!PIPE || kP1 >= 2, "the previous chunk is merged (step 0) before m_c's weights (step kP1 - 1)");
  constexpr int kThreads = Ly::kThreads, kAhead = Ly::kAhead;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gq = lane >> 2, tq = lane & 3;
  const int G = a.group, VG = nr * G;
  const uint32_t sbase = smem_addr(smem);
  const int nk_ref = a.n_keys[tref];
  const int64_t kv_dim = static_cast<int64_t>(a.n_kv_heads) * HD;
  const int bt = a.block_tokens;

  int nk_row[2];
  int64_t orow[2];
  thread_rows(a, t0, kh, G, VG, warp * 16 + gq, nk_row, orow);
  int nkw = max(nk_row[0], nk_row[1]);  // the warp's most keys
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) nkw = max(nkw, __shfl_xor_sync(0xffffffffu, nkw, o));

  // q of the block's virtual rows, BF16, swizzled (rows past VG zero), as the old walk stages it.
  constexpr int kQPieces = NW * 16 * HD / 4 / kThreads;
  static_assert(kQPieces % 8 == 0, "q pieces per thread");
#pragma unroll 1
  for (int k0 = 0; k0 < kQPieces; k0 += 8) {
    float4 x[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int i = tid + (k0 + k) * kThreads, vr = i / (HD / 4), piece = i % (HD / 4);
      x[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (vr < VG) {
        const int r = vr / G, g = vr % G;
        x[k] = *reinterpret_cast<const float4*>(
            a.q + (static_cast<int64_t>(t0 + r) * a.n_heads + kh * G + g) * HD + piece * 4);
      }
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int i = tid + (k0 + k) * kThreads, vr = i / (HD / 4), piece = i % (HD / 4);
      *reinterpret_cast<uint2*>(smem + Ly::kQ + swz(vr, piece >> 1, kRb) + (piece & 1) * 8) =
          make_uint2(pack_bf16x2(x[k].x, x[k].y), pack_bf16x2(x[k].z, x[k].w));
    }
  }
  // Element offsets of chunk c's positions into slot c & 1 (read first, written later, as the
  // old walk does).
  constexpr int kOffPer = (kChunk + kThreads - 1) / kThreads;
  auto read_blocks = [&](int c, int (&blk)[kOffPer]) {
    const int np = min(kChunk, nk_ref - c * kChunk);
#pragma unroll
    for (int k = 0; k < kOffPer; ++k) {
      const int i = tid + k * kThreads;
      blk[k] = i < np ? a.block_tables[tref * a.table_stride + (c * kChunk + i) / bt] : 0;
    }
  };
  auto write_off = [&](int c, const int (&blk)[kOffPer]) {
    const int np = min(kChunk, nk_ref - c * kChunk);
    const uint32_t o = sbase + Ly::kOff + (c & 1) * kChunk * 8;
#pragma unroll
    for (int k = 0; k < kOffPer; ++k) {
      const int i = tid + k * kThreads, p = c * kChunk + i;
      if (i < np)
        sts_s64(o + i * 8, (static_cast<int64_t>(blk[k]) * bt + p % bt) * kv_dim +
                               static_cast<int64_t>(kh) * HD);
    }
  };
  {
    int b0[kOffPer], b1[kOffPer];
    if (0 < c1) read_blocks(0, b0);
    if (1 < c1) read_blocks(1, b1);
    if (0 < c1) write_off(0, b0);
    if (1 < c1) write_off(1, b1);
  }
  __syncthreads();  // q and the first offsets are in

  const int l7 = lane & 7, hi = lane >> 4, mid = (lane >> 3) & 1;
  const uint32_t qa = sbase + Ly::kQ + (warp * 16 + l7 + mid * 8) * kRb;
  const uint32_t ka = (l7 + hi * 8) * kRb;
  const uint32_t va = (l7 + mid * 8) * kRb;
  uint32_t xq[4], xk[4];
  lane_chunks(l7, hi, mid, xq, xk);
  [[maybe_unused]] uint32_t qf[QREG ? kKt : 1][4];
  if constexpr (QREG) {
#pragma unroll
    for (int kk = 0; kk < kKt; ++kk) ldmatrix_x4(qf[kk], qa + chunk_off(xq, 2 * kk));
  }
  auto q_frag = [&](int kk, uint32_t (&af)[4]) {
    if constexpr (QREG) {
#pragma unroll
      for (int i = 0; i < 4; ++i) af[i] = qf[kk][i];
    } else {
      ldmatrix_x4(af, qa + chunk_off(xq, 2 * kk));
    }
  };

  // Unit u of chunk c: u < kP1: key sub-tiles 2u, 2u + 1 (positions [2u kSub, 2u kSub + 2kSub));
  // else t = u - kP1: key sub-tile t in rows [0, kSub), value sub-tile t in rows [kSub, 2kSub).
  // Global unit g = c kNu + u sits in slot g % 4. 16-byte granule of row r at swz(r, g, kRb),
  // zero past the reference row's keys.
  constexpr int kGran = HD / 8;
  static_assert(kThreads % kGran == 0, "whole rows per step");
  constexpr int kRowStep = kThreads / kGran, kUnitRows = 2 * kSub;
  constexpr int kPieces = (kUnitRows + kRowStep - 1) / kRowStep;
  const int prow = tid / kGran, pgran = tid % kGran;
  const uint32_t ring = sbase + Ly::kRing;
  auto slot = [&](int g) { return ring + static_cast<uint32_t>(g & (Ly::kSlots - 1)) * Ly::kUnitBytes; };
  auto load = [&](int c, int u) {
    const int np = min(kChunk, nk_ref - c * kChunk);
    const uint32_t o = sbase + Ly::kOff + (c & 1) * kChunk * 8;
    const uint32_t dst = slot(c * kNu + u);
#pragma unroll
    for (int k = 0; k < kPieces; ++k) {
      const int row = prow + k * kRowStep;
      if (kUnitRows % kRowStep != 0 && row >= kUnitRows) break;
      const bool isv = u >= kP1 && row >= kSub;
      const int p = u >= kP1 ? (u - kP1) * kSub + row - (isv ? kSub : 0) : u * kUnitRows + row;
      const uint16_t* src = (isv ? a.v : a.k) + pgran * 8;
      const bool ok = p < np;
      cp_async16(dst + swz(row, pgran, kRb), ok ? src + lds_s64(o + p * 8) : src, ok);
    }
  };
#pragma unroll
  for (int u = 0; u < kAhead; ++u) {
    if (0 < c1) load(0, u);
    cp_async_commit();
  }
  // Chunk c + 1's offsets are written at step kOffAt of chunk c (its first unit is loaded after
  // step kNu - kAhead's barrier).
  constexpr int kOffAt = kNu / 2 < kNu - kAhead ? kNu / 2 : kNu - kAhead;

  float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.0f, 0.0f};
  const uint32_t Apriv = sbase + Ly::kA + (warp * (HD / 8) * 4 * 32 + lane) * 4;
#pragma unroll
  for (int i = 0; i < HD / 8 * 4; ++i) sts_f(Apriv + i * 128, 0.0f);

  // The chunk whose exps and P.V are under way ("e-chunk"): its positions for this warp and the
  // two rows, m_c, the merge weights, l's lane sums, a_c.
  int e_npw = 0, e_np0 = 0, e_np1 = 0;
  float mrow[2] = {-INFINITY, -INFINITY}, alpha[2] = {1.0f, 1.0f}, beta[2] = {0.0f, 0.0f};
  float sum[2] = {0.0f, 0.0f};
  float ac[HD / 8][4];
  float Sp[kNts][4];  // S of the sub-tile whose exps are next (unscaled)

  // S of positions [kSub (row0 / kSub) ..) of the staged rows [row0, row0 + kSub) of `buf`:
  // k-steps over d in increasing order, tiles past the warp's keys skipped (left 0).
  auto qk = [&](float (&S)[kNts][4], uint32_t buf, int row0, int pos0, int npw) {
#pragma unroll
    for (int jt = 0; jt < kNts; ++jt) S[jt][0] = S[jt][1] = S[jt][2] = S[jt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kKt; ++kk) {
      uint32_t af[4];
      q_frag(kk, af);
#pragma unroll
      for (int jj = 0; jj < kNts / 2; ++jj) {
        if (pos0 + jj * 16 < npw) {
          uint32_t b[4];
          ldmatrix_x4(b, buf + ka + (row0 + jj * 16) * kRb + chunk_off(xk, 2 * kk));
          mma_bf16_16816(S[2 * jj], af, b[0], b[1]);
          mma_bf16_16816(S[2 * jj + 1], af, b[2], b[3]);
        }
      }
    }
  };
  // e, l and P.V of the e-chunk's sub-tile t (scores Sp, values in rows [kSub, 2kSub) of vbuf).
  auto softmax_pv = [&](int t, uint32_t vbuf) {
    if (t == 0) {
      sum[0] = sum[1] = 0.0f;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n) ac[n][0] = ac[n][1] = ac[n][2] = ac[n][3] = 0.0f;
    }
    uint32_t pf[kSub / 16][4];
#pragma unroll
    for (int jl = 0; jl < kNts; ++jl) {
      const int jt = t * kNts + jl;
      float s[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) s[e] = __fmul_rn(Sp[jl][e], a.scale);
      // SEL: no branch per tile (see attention.cu's SEL).
      if (SEL || jt * 8 < e_npw) {
        if constexpr (SEL) {
          exp_tile_select(s, jt, tq, e_np0, e_np1, mrow);
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            s[e] = tile_pos(jt, tq, e) < (e < 2 ? e_np0 : e_np1)
                       ? exp_f32_walk(__fsub_rn(s[e], mrow[e >> 1]))
                       : 0.0f;
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) sum[e >> 1] = __fadd_rn(sum[e >> 1], s[e]);
      } else {
        s[0] = s[1] = s[2] = s[3] = 0.0f;
      }
      if (jl % 2 == 0) {
        pf[jl / 2][0] = pack_bf16x2(s[0], s[1]);
        pf[jl / 2][1] = pack_bf16x2(s[2], s[3]);
      } else {
        pf[jl / 2][2] = pack_bf16x2(s[0], s[1]);
        pf[jl / 2][3] = pack_bf16x2(s[2], s[3]);
      }
    }
#pragma unroll
    for (int kk = 0; kk < kSub / 16; ++kk) {
      const int ks = t * (kSub / 16) + kk;
      if (ks * 16 < e_npw) {
#pragma unroll
        for (int nn = 0; nn < HD / 16; ++nn) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, vbuf + kSub * kRb + va + kk * 16 * kRb + chunk_off(xq, 2 * nn));
          mma_bf16_16816(ac[2 * nn], pf[kk], b[0], b[1]);
          mma_bf16_16816(ac[2 * nn + 1], pf[kk], b[2], b[3]);
        }
      }
    }
  };
  // The e-chunk done: l_c = (l0 + l1) + (l2 + l3) over the quad, then the merge into (M, L, A).
  auto finish_chunk = [&]() {
    float lrow[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      sum[r] = __fadd_rn(sum[r], __shfl_xor_sync(0xffffffffu, sum[r], 1));
      sum[r] = __fadd_rn(sum[r], __shfl_xor_sync(0xffffffffu, sum[r], 2));
      lrow[r] = sum[r];
    }
    const bool has[2] = {e_np0 > 0, e_np1 > 0};
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (has[e >> 1]) {
          const uint32_t A = Apriv + (n * 4 + e) * 128;
          sts_f(A, merge_one(lds_f(A), ac[n][e], alpha[e >> 1], beta[e >> 1]));
        }
#pragma unroll
    for (int r = 0; r < 2; ++r)
      if (has[r]) {
        L[r] = merge_one(L[r], lrow[r], alpha[r], beta[r]);
        M[r] = fmaxf(M[r], mrow[r]);
      }
  };

  for (int c = 0; c < c1; ++c) {
    const bool next_off = c > 0 && c + 1 < c1;
    int nblk[kOffPer];
    if (next_off) read_blocks(c + 1, nblk);
    const int npw = min(kChunk, nkw - c * kChunk);
    const int np0 = nk_row[0] - c * kChunk, np1 = nk_row[1] - c * kChunk;
    const int g0 = c * kNu;
    float mx[2] = {-INFINITY, -INFINITY};

    for_each_const<kNu>([&](auto uc) {
      constexpr int u = decltype(uc)::value;
      cp_async_wait<kAhead - 1>();  // this thread's pieces of unit u landed
      if constexpr (u == kOffAt) {
        if (next_off) write_off(c + 1, nblk);
      }
      // Every thread's pieces of unit u are in; every warp is done with step u - 1, so the slot
      // of unit u - 2 (used last by that step) is refilled below.
      __syncthreads();
      if constexpr (u + kAhead < kNu) load(c, u + kAhead);
      else if (c + 1 < c1) load(c + 1, u + kAhead - kNu);
      cp_async_commit();
      const uint32_t buf = slot(g0 + u);

      if constexpr (u < kP1) {
        // Pass 1: two key sub-tiles, the rows' max only.
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float S[kNts][4];
          const int pos0 = u * kUnitRows + h * kSub;
          qk(S, buf, h * kSub, pos0, npw);
#pragma unroll
          for (int jl = 0; jl < kNts; ++jl)
            scale_tile_max(S[jl], pos0 / 8 + jl, tq, np0, np1, a.scale, mx);
        }
        // The previous chunk's last sub-tile (its values in the unit before this one), beside
        // this chunk's first pass-1 MMAs.
        if constexpr (PIPE && u == 0) {
          if (c > 0) {
            softmax_pv(kSpc - 1, slot(g0 - 1));
            finish_chunk();
          }
        }
        if constexpr (u == kP1 - 1) {
          // m_c known: chunk c becomes the e-chunk.
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            mrow[r] = quad_max(mx[r]);
            float Mn;
            merge_weights(M[r], mrow[r], Mn, alpha[r], beta[r]);
          }
          e_npw = npw, e_np0 = np0, e_np1 = np1;
        }
      } else {
        // Pass 2: S of sub-tile t, beside e and P.V of sub-tile t - 1.
        constexpr int t = u - kP1;
        if constexpr (PIPE) {
          float Sn[kNts][4];
          qk(Sn, buf, 0, t * kSub, npw);
          if constexpr (t > 0) softmax_pv(t - 1, slot(g0 + u - 1));
#pragma unroll
          for (int jl = 0; jl < kNts; ++jl)
#pragma unroll
            for (int e = 0; e < 4; ++e) Sp[jl][e] = Sn[jl][e];
        } else {
          qk(Sp, buf, 0, t * kSub, npw);
          softmax_pv(t, buf);
          if constexpr (t == kSpc - 1) finish_chunk();
        }
      }
    });
  }
  cp_async_wait<0>();
  if (PIPE && c1 > 0) {
    // The last chunk's last sub-tile: its unit was published by its own step's barrier and no
    // load follows it.
    softmax_pv(kSpc - 1, slot(c1 * kNu - 1));
    finish_chunk();
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (orow[r] < 0) continue;
    float* o = a.out + orow[r] * HD;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      const uint32_t A = Apriv + (n * 4 + 2 * r) * 128;
      const float x0 = nk_row[r] > 0 ? __fdiv_rn(lds_f(A), L[r]) : 0.0f;
      const float x1 = nk_row[r] > 0 ? __fdiv_rn(lds_f(A + 128), L[r]) : 0.0f;
      *reinterpret_cast<float2*>(o + n * 8 + 2 * tq) = make_float2(x0, x1);
    }
  }
  __syncthreads();  // shared memory is reused by a following walk2_tiles
}

// Block b takes rows [rb R, rb R + R) of kv head b % n_kv_heads, the row blocks in decreasing rb
// (the causal rows with the most keys start first), as the old walk does.
template <int HD, int NW, bool QREG, bool PIPE, bool SEL>
__global__ void __launch_bounds__(NW * 32, 1) attn_walk2(AttnArgs a) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  extern __shared__ __align__(128) uint8_t smem[];
  const int nrb = (a.T + a.rows - 1) / a.rows;
  const int rb = nrb - 1 - static_cast<int>(blockIdx.x) / a.n_kv_heads;
  const int kh = blockIdx.x % a.n_kv_heads;
  const int t0 = rb * a.rows, nr = min(a.rows, a.T - t0);
  int tref;
  if (rows_share(a, t0, nr, tref)) {
    walk2_tiles<HD, NW, QREG, PIPE, SEL>(smem, a, t0, nr, kh, tref, chunks_of(a.n_keys[tref]));
  } else {
    for (int r = 0; r < nr; ++r)
      walk2_tiles<HD, NW, QREG, PIPE, SEL>(smem, a, t0 + r, 1, kh, t0 + r,
                                           chunks_of(a.n_keys[t0 + r]));
  }
}

template <int HD, int NW, bool QREG, bool PIPE, bool SEL>
void launch_walk2_nw(AttnArgs& a, int64_t T, int rows_override) {
  constexpr int kSmem = Walk2Layout<HD, NW>::kBytes;
  allow_smem<attn_walk2<HD, NW, QREG, PIPE, SEL>>(kSmem);
  const int rmax = NW * 16 / a.group;
  const int64_t fill = (T * a.n_kv_heads + sm_count() - 1) / sm_count();
  a.rows = rows_override > 0 ? std::min(rows_override, rmax)
                             : static_cast<int>(std::min<int64_t>(rmax, std::max<int64_t>(1, fill)));
  const int64_t blocks = (T + a.rows - 1) / a.rows * a.n_kv_heads;
  launch("attn_walk2", attn_walk2<HD, NW, QREG, PIPE, SEL>, static_cast<unsigned>(blocks), NW * 32, kSmem, a);
}

__global__ void exp_mismatch_kernel(uint64_t begin, uint64_t end, unsigned long long* count,
                                    unsigned* first) {
  for (uint64_t i = begin + blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < end;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const float x = __uint_as_float(static_cast<unsigned>(i));
    const unsigned want = __float_as_uint(exp_f32(x));
    if (__float_as_uint(exp_f32_walk(x)) != want || __float_as_uint(exp_f32_select(x)) != want) {
      atomicAdd(count, 1ull);
      atomicMin(first, static_cast<unsigned>(i));
    }
  }
}

}  // namespace

template <int HD>
void launch_walk2(AttnArgs& a, int64_t T, int rows_override, int variant) {
  if (variant == kWalkNew12) launch_walk2_nw<HD, 12, false, false, false>(a, T, rows_override);
  else if (variant == kWalkNew12Select) launch_walk2_nw<HD, 12, false, false, true>(a, T, rows_override);
  else if (variant == kWalkNew8Plain) launch_walk2_nw<HD, 8, true, false, false>(a, T, rows_override);
  else launch_walk2_nw<HD, 8, true, true, false>(a, T, rows_override);
}
template void launch_walk2<64>(AttnArgs&, int64_t, int, int);
template void launch_walk2<128>(AttnArgs&, int64_t, int, int);

}  // namespace lockstep::kernels::cuda::attn

namespace lockstep::kernels::cuda::testing {
uint64_t attention_exp_mismatches(uint32_t* first_bad) {
  using namespace attn;
  unsigned long long* buf = nullptr;
  check(cudaMalloc(&buf, 16), "exp test: allocate");
  const unsigned init[4] = {0, 0, 0xffffffffu, 0};
  check(cudaMemcpyAsync(buf, init, 16, cudaMemcpyHostToDevice, stream()), "exp test: upload");
  note_stream_op();
  launch("exp_mismatch_kernel", exp_mismatch_kernel, 132 * 8, 256, 0, uint64_t{0},
         uint64_t{1} << 32, buf, reinterpret_cast<unsigned*>(buf + 1));
  unsigned out[4];
  check(cudaMemcpyAsync(out, buf, 16, cudaMemcpyDeviceToHost, stream()), "exp test: download");
  check(cudaStreamSynchronize(stream()), "exp test: sync");
  note_stream_op();
  check(cudaFree(buf), "exp test: free");
  if (first_bad) *first_bad = out[2];
  return static_cast<uint64_t>(out[0]) | (static_cast<uint64_t>(out[1]) << 32);
}
}  // namespace lockstep::kernels::cuda::testing
