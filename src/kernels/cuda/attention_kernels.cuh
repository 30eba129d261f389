// The CUDA attention kernels and their launches, templated on head_dim (attention.cu has the
// schedule they keep and the dispatcher). Each head_dim is instantiated in its own translation
// unit (attention_hd64.cu ... attention_hd512.cu): the kernels are the longest compile of the
// CUDA backend, and four units build in parallel.
#pragma once

#include "kernels/cuda/attention_internal.cuh"

namespace lockstep::kernels::cuda {

namespace {

using namespace attn;

// Rows t0 .. t0 + nr - 1 of kv head kh (key locations from row tref, the one with the most keys),
// chunks [c0, c1): each warp computes its 16 virtual rows. WALK merges every chunk and writes
// out; otherwise (c1 = c0 + 1) the chunk's partials go to part_acc / part_ml.
template <int HD, int NW, bool WALK, int ST = 0>
__device__ void run_tiles(uint8_t* smem, const AttnArgs& a, int t0, int nr, int kh, int tref,
                          int c0, int c1) {
  using Gm = Geo<HD>;
  using Ly = Layout<HD, NW, WALK, ST>;
  constexpr int kSub = Gm::kSub, kNk = Gm::kNk, kNst = Gm::kNst, kKt = Gm::kKt;
  constexpr int kSubV = Gm::kSubV, kSpcV = Gm::kSpcV, kKc = Gm::kKc, kVc = Gm::kVc;
  constexpr int kNts = Gm::kNts, kDh = Gm::kDh, kRq = Gm::kQRowBytes, kRb = Gm::kRowBytes;
  constexpr int kRv = Gm::kVRowBytes;
  constexpr int kThreads = Ly::kThreads;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gq = lane >> 2, tq = lane & 3;
  const int G = a.group, VG = nr * G;
  const uint32_t sbase = smem_addr(smem);
  const int nk_ref = a.n_keys[tref];
  constexpr int kStages = Ly::kStages;
  const int64_t kv_dim = static_cast<int64_t>(a.n_kv_heads) * HD;
  const int bt = a.block_tokens;

  // This thread's two tile rows (gq and gq + 8): keys and output row (t * n_heads + h, or -1).
  int nk_row[2], fk_row[2];
  int64_t orow[2];
  thread_rows(a, t0, kh, G, VG, warp * 16 + gq, nk_row, orow, fk_row);
  // The warp's most keys, its fewest over its rows that exist (rows past VG are left out:
  // nothing of theirs is written), and its latest first key (sliding window) over those rows.
  int nkw = max(nk_row[0], nk_row[1]);
  int nkl = min(orow[0] < 0 ? INT_MAX : nk_row[0], orow[1] < 0 ? INT_MAX : nk_row[1]);
  int fkw = max(orow[0] < 0 ? 0 : fk_row[0], orow[1] < 0 ? 0 : fk_row[1]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    nkw = max(nkw, __shfl_xor_sync(0xffffffffu, nkw, o));
    nkl = min(nkl, __shfl_xor_sync(0xffffffffu, nkl, o));
    fkw = max(fkw, __shfl_xor_sync(0xffffffffu, fkw, o));
  }

  // q of the block's virtual rows, BF16, swizzled (rows past VG zero); loads in batches of 8
  // ahead of their stores.
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
      *reinterpret_cast<uint2*>(smem + Ly::kQ + swz(vr, piece >> 1, kRq) + (piece & 1) * 8) =
          make_uint2(pack_bf16x2(x[k].x, x[k].y), pack_bf16x2(x[k].z, x[k].w));
    }
  }
  // Element offsets of chunk c's positions (for its kv head), into slot c & 1: the block-table
  // entries are read into registers first (read_blocks) and written out later (write_off), so
  // the read's latency is not waited for at a barrier.
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
    if (c0 < c1) read_blocks(c0, b0);
    if (c0 + 1 < c1) read_blocks(c0 + 1, b1);
    if (c0 < c1) write_off(c0, b0);
    if (c0 + 1 < c1) write_off(c0 + 1, b1);
  }
  __syncthreads();  // q and the first offsets are in

  // ldmatrix addresses (lane_chunks, attention_internal.cuh).
  const int l7 = lane & 7, hi = lane >> 4, mid = (lane >> 3) & 1;
  const uint32_t qa = sbase + Ly::kQ + (warp * 16 + l7 + mid * 8) * kRq;  // q rows; chunk 2kk + hi
  const uint32_t ka = (l7 + hi * 8) * kRb;                  // key rows 16jj + ..; chunk 2kk + mid
  const uint32_t va = (l7 + mid * 8) * kRv;                 // value rows 16kk + ..; chunk 2nn + hi
  uint32_t xq[4], xk[4];  // xq also serves the values
  lane_chunks(l7, hi, mid, xq, xk);

  // Sub-tile j of chunk c (Geo): for j < kNk the keys of positions [kSub (j / kKparts), +kSub),
  // columns [kKc (j % kKparts), +kKc); then the values of pass ps = (j - kNk) / kSpcV, positions
  // [kSubV ((j - kNk) % kSpcV), +kSubV), columns [kVc ps, +kVc) (all of them where kVc = HD).
  // Rows of kKc (kVc) BF16 copied from the cache as they are (kv_write rounded them) into ring
  // slot j % kStages (the walk's sub-tile s = (c - c0) kNst + j: kStages divides kNst), 16-byte
  // granule g of row r at swz(r, g, row bytes), zero-filled past the reference row's keys. A
  // thread's pieces: granule tid % kGran of rows tid / kGran + k kRowStep (keys; kGranV,
  // kRowStepV for values).
  constexpr int kGran = kKc / 8, kGranV = kVc / 8;
  static_assert(kThreads % kGran == 0 && kThreads % kGranV == 0, "whole rows per step");
  constexpr int kRowStep = kThreads / kGran, kRowStepV = kThreads / kGranV;
  static_assert(kRowStep * Ly::kPieces == kSub && kRowStepV * Ly::kPieces == kSubV,
                "the pieces cover the sub-tile");
  const int prow = tid / kGran, pgran = tid % kGran;
  const int prowv = tid / kGranV, pgranv = tid % kGranV;
  const uint32_t ring = sbase + Ly::kRing;
  auto load = [&](int c, int j) {
    const bool key = j < kNk;
    const int jv = j - kNk;
    const int col0 = key ? (j % Gm::kKparts) * kKc : (kVc == HD ? 0 : (jv / kSpcV) * kVc);
    const int r0 = key ? prow : prowv, g = key ? pgran : pgranv;
    const int step = key ? kRowStep : kRowStepV, rbytes = key ? kRb : kRv;
    const uint16_t* src = (key ? a.k : a.v) + col0 + g * 8;
    const int p0 = (key ? (j / Gm::kKparts) * kSub : (jv % kSpcV) * kSubV) + r0;
    const int np = min(kChunk, nk_ref - c * kChunk);
    const uint32_t o = sbase + Ly::kOff + (c & 1) * kChunk * 8;
    const uint32_t dst = ring + (j % kStages) * Ly::kSlotBytes;
#pragma unroll
    for (int k = 0; k < Ly::kPieces; ++k) {
      const int p = p0 + k * step;
      const bool ok = p < np;
      cp_async16(dst + swz(r0 + k * step, g, rbytes), ok ? src + lds_s64(o + p * 8) : src, ok);
    }
  };
  // Sub-tiles in flight; sub-tile s is cp.async group s (the prologue's kAhead groups, then one
  // per sub-tile, empty past the last chunk).
  constexpr int kAhead = kStages - 1;
#pragma unroll
  for (int j = 0; j < kAhead; ++j) {
    if (c0 < c1) load(c0, j);
    cp_async_commit();
  }
  // Where chunk c + 1's offsets are written in chunk c (before that sub-tile's barrier, which
  // publishes them): half-way, or earlier when its first load (sub-tile kNst - kAhead, issued
  // after that sub-tile's barrier) comes sooner.
  constexpr int kOffAt = kNst / 2 < kNst - kAhead ? kNst / 2 : kNst - kAhead;
  static_assert(kOffAt >= 0 && kOffAt <= kNst - kAhead, "next chunk's offsets written in time");

  [[maybe_unused]] float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.0f, 0.0f};
  // A of this thread's (row, d) elements, element i at Apriv + 128 i (conflict-free, private).
  [[maybe_unused]] const uint32_t Apriv = sbase + Ly::kA + (warp * (HD / 8) * 4 * 32 + lane) * 4;
  if constexpr (WALK) {
#pragma unroll
    for (int i = 0; i < HD / 8 * 4; ++i) sts_f(Apriv + i * 128, 0.0f);
  }

  for (int c = c0; c < c1; ++c) {
    // Chunk c + 1's offsets (its first loads are issued kAhead sub-tiles before chunk c ends):
    // read now, written at sub-tile kOffAt of chunk c, published by that sub-tile's barrier.
    // Slot (c + 1) & 1 last served chunk c - 1, whose loads were all issued (and their offsets
    // read) before a barrier of chunk c - 1 (kAhead >= 1).
    const bool next_off = c > c0 && c + 1 < c1;
    int nblk[kOffPer];
    if (next_off) read_blocks(c + 1, nblk);
    const int npw = min(kChunk, nkw - c * kChunk);           // the warp's positions (<= 0: none)
    const int np0 = nk_row[0] - c * kChunk, np1 = nk_row[1] - c * kChunk;  // the rows' own
    const int lo0 = fk_row[0] - c * kChunk, lo1 = fk_row[1] - c * kChunk;  // sliding window
    float S[32][4];
#pragma unroll
    for (int j = 0; j < 32; ++j) S[j][0] = S[j][1] = S[j][2] = S[j][3] = 0.0f;
    uint32_t pf[16][4];
    float mrow[2], lrow[2];
    [[maybe_unused]] float alpha[2], beta[2];
    float ac[kDh / 8][4];

    // The chunk's sub-tiles, j a compile-time constant in each (register arrays are indexed
    // by it; a plain unrolled loop of 48 is not always unrolled).
    for_each_const<kNst>([&](auto jc) {
      constexpr int j = decltype(jc)::value;
      cp_async_wait<kAhead - 1>();  // this thread's pieces of sub-tile j landed
      if constexpr (j == kOffAt) {
        if (next_off) write_off(c + 1, nblk);
      }
      // Every thread's pieces of sub-tile j are in (and chunk c + 1's offsets, at kOffAt); every
      // warp is done with sub-tile j - 1, whose slot the load below refills.
      __syncthreads();
      // Sub-tile j + kAhead (maybe of chunk c + 1) into the slot sub-tile j - 1 left.
      if constexpr (j + kAhead < kNst) load(c, j + kAhead);
      else if (c + 1 < c1) load(c + 1, j + kAhead - kNst);
      cp_async_commit();
      // A warp whose rows have no keys in chunk c (npw <= 0) skips every MMA below but still
      // runs the rest, so pf and ac are defined on every path (else the compiler keeps them
      // live through the whole chunk).
      const uint32_t buf = ring + (j % kStages) * Ly::kSlotBytes;

      if constexpr (j < kNk) {
        // Scores of positions [kSub pg, kSub pg + kSub), columns [kKc part, +kKc): k-steps over d
        // in increasing order (part 0's sub-tile comes first).
        constexpr int pg = j / Gm::kKparts, part = j % Gm::kKparts;
#pragma unroll
        for (int kk = 0; kk < kKt; ++kk) {
          uint32_t af[4];
          ldmatrix_x4(af, qa + chunk_off(xq, 2 * (part * kKt + kk)));
#pragma unroll
          for (int jj = 0; jj < kNts / 2; ++jj) {
            if (pg * kSub + jj * 16 < npw) {
              uint32_t b[4];
              ldmatrix_x4(b, buf + ka + jj * 16 * kRb + chunk_off(xk, 2 * kk));
              mma_bf16_16816(S[pg * kNts + 2 * jj], af, b[0], b[1]);
              mma_bf16_16816(S[pg * kNts + 2 * jj + 1], af, b[2], b[3]);
            }
          }
        }
        if constexpr (j == kNk - 1) {
          // Softmax pieces of the two rows: max, e = exp(score - max), the lane sums, the quad.
          // Element e of tile jt sits at position 8 jt + 2 tq + (e & 1), of row e >> 1.
          // The max is exact in any order: two running maxes per row (element e's), then one.
          float mx4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, mx[2];
          float sum[2] = {0.0f, 0.0f};
          if (npw > 0 && nkl - c * kChunk >= kChunk && fkw <= c * kChunk) {
            // Warp-uniform: every row of the warp has all of the chunk's positions, so no
            // element is masked (the same operations as below, less the position tests).
#pragma unroll
            for (int jt = 0; jt < 32; ++jt)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                S[jt][e] = __fmul_rn(S[jt][e], a.scale);
                mx4[e] = fmaxf(mx4[e], S[jt][e]);
              }
#pragma unroll
            for (int r = 0; r < 2; ++r) mx[r] = quad_max(fmaxf(mx4[2 * r], mx4[2 * r + 1]));
#pragma unroll
            for (int jt = 0; jt < 32; ++jt)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                S[jt][e] = exp_f32_select<true>(__fsub_rn(S[jt][e], mx[e >> 1]));
                sum[e >> 1] = __fadd_rn(sum[e >> 1], S[jt][e]);
              }
          } else {
            // Some row ends in the chunk (or its window starts there): positions outside a row's
            // keys are left out of its max and get e = 0. 64-position groups wholly past the warp's positions (npw, uniform)
            // are skipped: their S are the zeros they started as (no MMA ran there), which is
            // what packs to P, and their e would add +0 to sums that are never -0. Within a
            // group one basic block (exp_f32_select: no branch per element).
            const int q0 = np0 - 2 * tq, q1 = np1 - 2 * tq;
            const int f0 = lo0 - 2 * tq, f1 = lo1 - 2 * tq;
            // Element (jt, e) is the row's iff f(e >> 1) <= 8 jt + (e & 1) < q(e >> 1).
            auto mine = [&](int jt, int e) {
              const int x = 8 * jt + (e & 1);
              return x < (e < 2 ? q0 : q1) && x >= (e < 2 ? f0 : f1);
            };
            // f(jt, e) over the elements of the groups that hold some of the warp's positions.
            auto each_live = [&](auto&& f) {
              for_each_const<4>([&](auto gc) {
                constexpr int g = decltype(gc)::value;
                if (g * 64 < npw) {
#pragma unroll
                  for (int jt = 8 * g; jt < 8 * g + 8; ++jt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) f(jt, e);
                }
              });
            };
            each_live([&](int jt, int e) {
              const float sc = __fmul_rn(S[jt][e], a.scale);
              S[jt][e] = sc;
              // -inf for a masked position: the max (never NaN) stays as it is.
              mx4[e] = fmaxf(mx4[e], mine(jt, e) ? sc : -INFINITY);
            });
#pragma unroll
            for (int r = 0; r < 2; ++r) mx[r] = quad_max(fmaxf(mx4[2 * r], mx4[2 * r + 1]));
            each_live([&](int jt, int e) {
              // A masked position's score may exceed the row's max (then y is not exp_f32's,
              // but it is not selected either).
              const float y = exp_f32_select<true>(__fsub_rn(S[jt][e], mx[e >> 1]));
              S[jt][e] = mine(jt, e) ? y : 0.0f;
              sum[e >> 1] = __fadd_rn(sum[e >> 1], S[jt][e]);
            });
          }
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            sum[r] = __fadd_rn(sum[r], __shfl_xor_sync(0xffffffffu, sum[r], 1));
            sum[r] = __fadd_rn(sum[r], __shfl_xor_sync(0xffffffffu, sum[r], 2));
            mrow[r] = mx[r];
            lrow[r] = sum[r];
          }
          // e as the A operand of P.V: k-step kk = positions [16 kk, 16 kk + 16).
#pragma unroll
          for (int kk = 0; kk < 16; ++kk) {
            pf[kk][0] = pack_bf16x2(S[2 * kk][0], S[2 * kk][1]);
            pf[kk][1] = pack_bf16x2(S[2 * kk][2], S[2 * kk][3]);
            pf[kk][2] = pack_bf16x2(S[2 * kk + 1][0], S[2 * kk + 1][1]);
            pf[kk][3] = pack_bf16x2(S[2 * kk + 1][2], S[2 * kk + 1][3]);
          }
          if constexpr (WALK) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              float Mn;
              merge_weights(M[r], mrow[r], Mn, alpha[r], beta[r]);
            }
          }
        }
      } else {
        // Values: pass ps covers d in [kDh ps, kDh ps + kDh); k-steps in increasing position.
        // vg: the pass's first granule in the sub-tile's rows.
        constexpr int ps = (j - kNk) / kSpcV, vs = (j - kNk) % kSpcV;
        constexpr int vg = kVc == HD ? ps * (kDh / 8) : 0;
        if constexpr (vs == 0) {
#pragma unroll
          for (int n = 0; n < kDh / 8; ++n) ac[n][0] = ac[n][1] = ac[n][2] = ac[n][3] = 0.0f;
        }
#pragma unroll
        for (int kk = 0; kk < kSubV / 16; ++kk) {
          const int ks = vs * (kSubV / 16) + kk;
          if (ks * 16 < npw) {
#pragma unroll
            for (int nn = 0; nn < kDh / 16; ++nn) {
              uint32_t b[4];
              ldmatrix_x4_trans(b, buf + va + kk * 16 * kRv + chunk_off(xq, vg + 2 * nn));
              mma_bf16_16816(ac[2 * nn], pf[ks], b[0], b[1]);
              mma_bf16_16816(ac[2 * nn + 1], pf[ks], b[2], b[3]);
            }
          }
        }
        if constexpr (vs == kSpcV - 1) {
          // Pass done: merge a_c into A (walk) or write the chunk's partials (split).
          const bool has[2] = {chunk_has_keys(lo0, np0), chunk_has_keys(lo1, np1)};
          if constexpr (WALK) {
#pragma unroll
            for (int n = 0; n < kDh / 8; ++n)
#pragma unroll
              for (int e = 0; e < 4; ++e)
                if (has[e >> 1]) {
                  const uint32_t A = Apriv + ((ps * (kDh / 8) + n) * 4 + e) * 128;
                  sts_f(A, merge_one(lds_f(A), ac[n][e], alpha[e >> 1], beta[e >> 1]));
                }
            if constexpr (ps == Gm::kPasses - 1) {
#pragma unroll
              for (int r = 0; r < 2; ++r)
                if (has[r]) {
                  L[r] = merge_one(L[r], lrow[r], alpha[r], beta[r]);
                  M[r] = fmaxf(M[r], mrow[r]);
                }
            }
          } else {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              if (!has[r]) continue;
              const int64_t idx = orow[r] * a.n_chunks + c;
#pragma unroll
              for (int n = 0; n < kDh / 8; ++n)
                *reinterpret_cast<float2*>(a.part_acc + idx * HD + ps * kDh + n * 8 + 2 * tq) =
                    make_float2(ac[n][2 * r], ac[n][2 * r + 1]);
              if (ps == 0 && tq == 0) {
                a.part_ml[idx * 2] = mrow[r];
                a.part_ml[idx * 2 + 1] = lrow[r];
              }
            }
          }
        }
      }
    });
  }
  cp_async_wait<0>();

  if constexpr (WALK) {
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
  }
  __syncthreads();  // shared memory is reused by a following run_tiles
}


// Split launch: block (c, rb * n_kv_heads + kh) writes chunk c's partials of rows
// [rb R, rb R + R) (R = a.rows).
template <int HD, int ST>
__device__ __forceinline__ void split_body(const AttnArgs& a) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int c = blockIdx.x, rb = blockIdx.y / a.n_kv_heads, kh = blockIdx.y % a.n_kv_heads;
  const int t0 = rb * a.rows, nr = min(a.rows, a.T - t0);
  if (!rows_have_keys_in_chunk(a, t0, nr, c)) return;  // no row of the block sees chunk c
  int tref;
  if (rows_share(a, t0, nr, tref)) {
    run_tiles<HD, Geo<HD>::kSplitWarps, false, ST>(smem, a, t0, nr, kh, tref, c, c + 1);
  } else {
    for (int r = 0; r < nr; ++r)
      if (rows_have_keys_in_chunk(a, t0 + r, 1, c))
        run_tiles<HD, Geo<HD>::kSplitWarps, false, ST>(smem, a, t0 + r, 1, kh, t0 + r, c, c + 1);
  }
}

// ST: Layout's slots (0: the default; fewer only in code for a smaller shared memory, whose body
// sm_90 code leaves out: common.cuh, kSmallSmemCode).
template <int HD, int ST>
__global__ void __launch_bounds__(Geo<HD>::kSplitWarps * 32) attn_split(AttnArgs a) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  if constexpr (ST != 0 && !kSmallSmemCode) __trap();  // never launched on sm_90 code
  else split_body<HD, ST>(a);
}

// Merge of the split launch: block (t * n_heads + h), thread d.
template <int HD>
__global__ void __launch_bounds__(HD) attn_merge(AttnArgs a) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int th = blockIdx.x, t = th / a.n_heads, d = threadIdx.x;
  const int nk = a.n_keys[t];
  const int nc = chunks_of(nk);
  float M = -INFINITY, L = 0.0f, A = 0.0f;
  // 8 chunks at a time: their loads are issued together, and only the running max chains the
  // weights (the same operations in the same order as one chunk at a time). A sliding window's
  // chunks start at its first key's (the ones before hold none of the row's positions).
  constexpr int kU = 8;
  for (int cb = first_key(a.window, nk) / kChunk; cb < nc; cb += kU) {
    float m[kU], l[kU], x[kU], al[kU], be[kU];
#pragma unroll
    for (int k = 0; k < kU; ++k) {
      m[k] = -INFINITY, l[k] = 0.0f, x[k] = 0.0f;
      if (cb + k < nc) {
        const int64_t idx = static_cast<int64_t>(th) * a.n_chunks + cb + k;
        m[k] = a.part_ml[idx * 2];
        l[k] = a.part_ml[idx * 2 + 1];
        x[k] = a.part_acc[idx * HD + d];
      }
    }
    float Mr = M;
#pragma unroll
    for (int k = 0; k < kU; ++k) {
      float Mn;
      merge_weights(Mr, m[k], Mn, al[k], be[k]);
      if (cb + k < nc) Mr = Mn;
    }
#pragma unroll
    for (int k = 0; k < kU; ++k) {
      if (cb + k < nc) {
        L = merge_one(L, l[k], al[k], be[k]);
        A = merge_one(A, x[k], al[k], be[k]);
      }
    }
    M = Mr;
  }
  a.out[static_cast<int64_t>(th) * HD + d] = nk > 0 ? __fdiv_rn(A, L) : 0.0f;
}

// Walk launch: block b takes rows [rb R, rb R + R) of kv head b % n_kv_heads, the row blocks in
// decreasing rb (the causal rows with the most keys start first).
template <int HD, int NW>
__device__ __forceinline__ void walk_body(const AttnArgs& a) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int nrb = (a.T + a.rows - 1) / a.rows;
  const int rb = nrb - 1 - static_cast<int>(blockIdx.x) / a.n_kv_heads;
  const int kh = blockIdx.x % a.n_kv_heads;
  const int t0 = rb * a.rows, nr = min(a.rows, a.T - t0);
  int tref;
  // A sliding window: chunks before every row's first key are left out (no row's bits change:
  // a chunk without the row's positions is not merged into it).
  int c0 = INT_MAX;
  for (int r = 0; r < nr; ++r)
    c0 = min(c0, first_key(a.window, a.n_keys[t0 + r]) / kChunk);
  if (rows_share(a, t0, nr, tref)) {
    run_tiles<HD, NW, true>(smem, a, t0, nr, kh, tref, min(c0, chunks_of(a.n_keys[tref])),
                            chunks_of(a.n_keys[tref]));
  } else {
    for (int r = 0; r < nr; ++r) {
      const int nk = a.n_keys[t0 + r], c1 = chunks_of(nk);
      run_tiles<HD, NW, true>(smem, a, t0 + r, 1, kh, t0 + r, min(first_key(a.window, nk) / kChunk, c1),
                              c1);
    }
  }
}

// NW: warps per block, Geo's kWalkWarps or fewer (only in code for a smaller shared memory, whose
// body sm_90 code leaves out); rows per block follow (a.rows), which never changes a row's bits.
template <int HD, int NW>
__global__ void __launch_bounds__(NW * 32, 1) attn_walk(AttnArgs a) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  if constexpr (NW != Geo<HD>::kWalkWarps && !kSmallSmemCode) __trap();  // never on sm_90 code
  else walk_body<HD, NW>(a);
}

// The split launch with the most ring slots the device's shared memory holds: the default, then
// half as many down to 2 (variants compiled for a smaller shared memory only: kSmallSmemCode).
// Head_dim 512 (Geo::kSplitWarps 4): 196 KiB with 16 slots, 132 KiB with 8 (A100's 163 KiB),
// 84 KiB with 2 (the 99 KiB devices).
template <int HD, int ST = 0>
void launch_split(const AttnArgs& a, int64_t nrb) {
  constexpr int kWarps = Geo<HD>::kSplitWarps;
  using Ly = Layout<HD, kWarps, false, ST>;
  if (Ly::kBytes > smem_optin()) {
    // Variants only down to one that fits the smallest supported device (kMinSmemOptin).
    if constexpr (Ly::kStages > 2 && Ly::kBytes > kMinSmemOptin)
      return launch_split<HD, Ly::kStages / 2>(a, nrb);
    refuse_smem("split", HD, Ly::kBytes);
  }
  allow_smem<attn_split<HD, ST>>(Ly::kBytes);
  const dim3 grid(static_cast<unsigned>(a.n_chunks), static_cast<unsigned>(nrb * a.n_kv_heads));
  launch("attn_split", attn_split<HD, ST>, grid, kWarps * 32, Ly::kBytes, a);
}

// The walk launch with the most warps (rows per block) the device's shared memory holds: Geo's
// kWalkWarps, then half as many down to 1 (only head_dim 512 goes below 2: 132 KiB with 2 warps,
// 84 KiB with 1 for the 99 KiB devices).
template <int HD, int NW = Geo<HD>::kWalkWarps>
void launch_walk(AttnArgs a, int64_t T) {
  using Ly = Layout<HD, NW, true>;
  if (Ly::kBytes > smem_optin()) {
    if constexpr (NW > 1 && Ly::kBytes > kMinSmemOptin) return launch_walk<HD, NW / 2>(a, T);
    refuse_smem("walk", HD, Ly::kBytes);
  }
  allow_smem<attn_walk<HD, NW>>(Ly::kBytes);
  const int rmax = NW * 16 / a.group;
  // As many rows per block as fit, fewer when that would leave multiprocessors idle.
  const int64_t fill = (T * a.n_kv_heads + sm_count() - 1) / sm_count();
  a.rows = a.rows_per_block(rmax, static_cast<int>(std::min<int64_t>(rmax, std::max<int64_t>(1, fill))),
                            rows_override);
  const int64_t blocks = (T + a.rows - 1) / a.rows * a.n_kv_heads;
  launch("attn_walk", attn_walk<HD, NW>, static_cast<unsigned>(blocks), NW * 32, Ly::kBytes, a);
}

template <int HD>
void run(AttnArgs a, int64_t T) {
  // Rows of many items (a batch of decode rows): the split launch at any T while its partials
  // stay small, since the walk takes rows of different sequences one after another in a block.
  // One chunk too: a walk block's warps each take 16 virtual rows, so a few rows leave all but
  // one warp idle while it runs the chunk's sub-tiles one after another (about 40 us for one
  // decode row of 4 KV heads over <= 256 keys on the H200, 82 at head_dim 256, about 190 at 512),
  // where the decode launch spreads the chunk over 8 warps.
  const int64_t rows = static_cast<int64_t>(T) * a.n_heads * a.n_chunks;
  const bool items = a.rows_hint > 0 && rows * (HD + 2) * 4 <= kSplitMaxPartBytes;
  const bool split = path_override == 1 || path_override >= 3 ||
                     (path_override == 0 && (T <= kSplitMaxT || items));
  if (!split) return launch_walk<HD>(a, T);
  auto* buf = static_cast<float*>(scratch(1, static_cast<size_t>(rows) * (HD + 2) * sizeof(float)));
  a.part_acc = buf;
  a.part_ml = buf + rows * HD;
  bool decode = false;
  if (path_override != 3) decode = launch_decode<HD>(a, T, rows_override, path_override);
  if (!decode) {
    const int rmax = Geo<HD>::kSplitWarps * 16 / a.group;
    a.rows = a.rows_per_block(rmax, rmax, rows_override);
    launch_split<HD>(a, (T + a.rows - 1) / a.rows);
  }
  launch("attn_merge", attn_merge<HD>, static_cast<unsigned>(T * a.n_heads), HD, 0, a);
}

}  // namespace

template <int HD>
void attn::run_attention(AttnArgs a, int64_t T) {
  run<HD>(a, T);
}

}  // namespace lockstep::kernels::cuda
