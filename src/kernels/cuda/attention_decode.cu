// attention (cuda_ops.h), the decode launch: chunk partials of a few query rows, one 256-position
// chunk per block spread over 8 warps. Same schedule and bits as the other launches (attention.cu).
#include "kernels/cuda/attention_internal.cuh"

namespace lockstep::kernels::cuda::attn {
namespace {

// Decode launch (split, a block's virtual rows in one 16-row tile): block (chunk c, row block,
// kv head, d part dz) of 8 warps. The chunk's keys, then its values (this block's DV = HD / DS
// columns), arrive by cp.async as the cache stores them (BF16, swizzled 16-byte granules, the
// walk's layout), the values still landing while the scores are computed (head_dim 512: the keys
// in two phases of 256 columns, d in [0, 256) then [256, 512), through one 128 KiB tile, each
// score's MMAs continuing in the same accumulator in increasing d);
// warp w computes the scores of positions [32w, 32w + 32) for the whole tile, the chunk max is
// taken over the warps, warp w's e(p) and its BF16 P fragments go to shared memory, warp 0 sums
// l_c in the documented lane order, and warp w computes a_c for columns [w DV / 8, +DV / 8)
// (value operands by ldmatrix.trans, as the walk), walking all 16 k-steps in increasing
// position. Every MMA has the operands and order of the schedule above, so the bits are the
// other launches'.
template <int HD, int DS>
struct DecLayout {
  static constexpr int kDV = HD / DS;                      // value columns of this block
  static constexpr int kKd = HD > 256 ? 256 : HD;          // key columns staged at once
  static constexpr int kPhases = HD / kKd;                 // key phases
  static constexpr int kRb = kKd * 2;                      // BF16 key row (of one phase)
  static constexpr int kRq = HD * 2;                       // BF16 q row
  static constexpr int kRv = kDV * 2;                      // BF16 value row
  static constexpr int kK = 0;                             // [256][kKd] BF16 keys (later E, P)
  static constexpr int kE = 0;                             // [32 tiles][32 lanes][4] FP32 e
  static constexpr int kP = kE + 32 * 32 * 16;             // [16 k-steps][32 lanes][4] u32
  static constexpr int kV = kK + kChunk * kRb;             // [256][kDV] BF16 values
  static constexpr int kQ = kV + kChunk * kRv;             // [16][HD] BF16 q
  static constexpr int kMax = kQ + 16 * kRq;               // [8 warps][16 rows] FP32
  static constexpr int kOff = kMax + 8 * 16 * 4;           // [256] int64 offsets
  static constexpr int kBytes = kOff + kChunk * 8;
  static_assert(kP + 16 * 32 * 16 <= kV, "E and P fit in the key tile");
  static_assert(kDV % 64 == 0, "8 warps x whole n-tiles");
  static_assert(kRv >= 128, "value rows span the 8 swizzled granules");
};

template <int HD, int DS>
__device__ void run_decode(uint8_t* smem, const AttnArgs& a, int t0, int nr, int kh, int tref,
                           int c, int dz) {
  using Ly = DecLayout<HD, DS>;
  constexpr int kRb = Ly::kRb, kRq = Ly::kRq, kRv = Ly::kRv, kDV = Ly::kDV;
  constexpr int kKt = Ly::kKd / 16;  // k-steps of one key phase
  constexpr int kNt = kDV / 64;  // n-tiles of 8 columns per warp
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gq = lane >> 2, tq = lane & 3;
  const int G = a.group, VG = nr * G;
  const uint32_t sbase = smem_addr(smem);
  const int nk_ref = a.n_keys[tref];
  const int np_ref = min(kChunk, nk_ref - c * kChunk);
  const int64_t kv_dim = static_cast<int64_t>(a.n_kv_heads) * HD;
  const int bt = a.block_tokens;

  int nk_row[2], fk_row[2];
  int64_t orow[2];
  thread_rows(a, t0, kh, G, VG, gq, nk_row, orow, fk_row);
  int nkw = max(nk_row[0], nk_row[1]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) nkw = max(nkw, __shfl_xor_sync(0xffffffffu, nkw, o));
  const int npw = min(kChunk, nkw - c * kChunk);  // the tile's positions in the chunk (> 0)
  const int np0 = nk_row[0] - c * kChunk, np1 = nk_row[1] - c * kChunk;
  const int lo0 = fk_row[0] - c * kChunk, lo1 = fk_row[1] - c * kChunk;  // sliding window

  // Offsets of the chunk's positions (thread i: position i), and q (BF16, swizzled).
  {
    const int i = tid;  // 256 threads, 256 positions
    if (i < np_ref) {
      const int p = c * kChunk + i;
      const int blk = a.block_tables[tref * a.table_stride + p / bt];
      sts_s64(sbase + Ly::kOff + i * 8,
              (static_cast<int64_t>(blk) * bt + p % bt) * kv_dim + static_cast<int64_t>(kh) * HD);
    }
    for (int i2 = tid; i2 < 16 * HD / 4; i2 += 256) {
      const int vr = i2 / (HD / 4), piece = i2 % (HD / 4);
      float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (vr < VG) {
        const int r = vr / G, g = vr % G;
        x = *reinterpret_cast<const float4*>(
            a.q + (static_cast<int64_t>(t0 + r) * a.n_heads + kh * G + g) * HD + piece * 4);
      }
      *reinterpret_cast<uint2*>(smem + Ly::kQ + swz(vr, piece >> 1, kRq) + (piece & 1) * 8) =
          make_uint2(pack_bf16x2(x.x, x.y), pack_bf16x2(x.z, x.w));
    }
  }
  __syncthreads();  // offsets and q are in

  // Keys (of phase ph), then this block's value columns: 16-byte granules (8 BF16) by cp.async,
  // granule g of row i at swz(i, g, row bytes), zero past the reference row's keys. Two groups:
  // the scores wait for the keys only.
  auto load_keys = [&](int ph) {
    constexpr int kGr = Ly::kKd / 8;          // granules per key row
    constexpr int kPer = kChunk * kGr / 256;  // per thread: 32 (256 columns), 16 (128) or 8 (64)
    const int g = tid % kGr;
    const uint16_t* src = a.k + ph * Ly::kKd + g * 8;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = tid / kGr + k * (256 / kGr);
      const bool ok = i < np_ref;
      cp_async16(sbase + Ly::kK + swz(i, g, kRb),
                 ok ? src + lds_s64(sbase + Ly::kOff + i * 8) : src, ok);
    }
    cp_async_commit();
  };
  load_keys(0);
  {
    constexpr int kGr = kDV / 8;              // granules per value row
    constexpr int kPer = kChunk * kGr / 256;  // per thread: 16 (DV 128) or 8 (DV 64)
    const int g = tid % kGr;
    const uint16_t* src = a.v + dz * kDV + g * 8;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = tid / kGr + k * (256 / kGr);
      const bool ok = i < np_ref;
      cp_async16(sbase + Ly::kV + swz(i, g, kRv),
                 ok ? src + lds_s64(sbase + Ly::kOff + i * 8) : src, ok);
    }
    cp_async_commit();
  }
  cp_async_wait<1>();  // this thread's key granules landed (the values may still be in flight)
  __syncthreads();  // keys are in

  // Scores of positions [32 warp, +32): tiles jt = 4 warp + t.
  const int l7 = lane & 7, hi = lane >> 4, mid = (lane >> 3) & 1;
  const uint32_t qa = sbase + Ly::kQ + (l7 + mid * 8) * kRq;
  const uint32_t ka = sbase + Ly::kK + (warp * 32 + l7 + hi * 8) * kRb;
  uint32_t xq[4], xk[4];
  lane_chunks(l7, hi, mid, xq, xk);
  float S[4][4];
#pragma unroll
  for (int t = 0; t < 4; ++t) S[t][0] = S[t][1] = S[t][2] = S[t][3] = 0.0f;
  // The k-steps' operands are loaded 8 at a time ahead of their MMAs (head_dim 256: two batches,
  // to hold the registers); the MMAs of a score run in increasing k either way.
  constexpr int kKb = kKt < 8 ? kKt : 8;
#pragma unroll 1
  for (int ph = 0; ph < Ly::kPhases; ++ph) {
    if (ph > 0) {  // every warp is done with the last phase's keys; then this phase's are in
      __syncthreads();
      load_keys(ph);
      cp_async_wait<0>();
      __syncthreads();
    }
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      if (warp * 32 + jj * 16 < npw) {
#pragma unroll
        for (int k0 = 0; k0 < kKt; k0 += kKb) {
          uint32_t af[kKb][4], b[kKb][4];
#pragma unroll
          for (int kk = 0; kk < kKb; ++kk) {
            ldmatrix_x4(af[kk], qa + chunk_off(xq, 2 * (ph * kKt + k0 + kk)));
            ldmatrix_x4(b[kk], ka + jj * 16 * kRb + chunk_off(xk, 2 * (k0 + kk)));
          }
#pragma unroll
          for (int kk = 0; kk < kKb; ++kk) {
            mma_bf16_16816(S[2 * jj], af[kk], b[kk][0], b[kk][1]);
            mma_bf16_16816(S[2 * jj + 1], af[kk], b[kk][2], b[kk][3]);
          }
        }
      }
    }
  }
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int t = 0; t < 4; ++t) scale_tile_max(S[t], warp * 4 + t, tq, lo0, lo1, np0, np1, a.scale, mx);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = quad_max(mx[r]);
    if (tq == 0) sts_f(sbase + Ly::kMax + (warp * 16 + gq + 8 * r) * 4, mx[r]);
  }
  __syncthreads();  // warp maxima in; every warp is done with the keys (E and P reuse them)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < 8; ++w) m = fmaxf(m, lds_f(sbase + Ly::kMax + (w * 16 + gq + 8 * r) * 4));
    mx[r] = m;
  }
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int jt = warp * 4 + t;
    if (jt * 8 < npw) exp_tile(S[t], jt, tq, lo0, lo1, np0, np1, mx);
    else S[t][0] = S[t][1] = S[t][2] = S[t][3] = 0.0f;
    *reinterpret_cast<float4*>(smem + Ly::kE + (jt * 32 + lane) * 16) =
        make_float4(S[t][0], S[t][1], S[t][2], S[t][3]);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int kk = warp * 2 + h;
    *reinterpret_cast<uint4*>(smem + Ly::kP + (kk * 32 + lane) * 16) =
        make_uint4(pack_bf16x2(S[2 * h][0], S[2 * h][1]), pack_bf16x2(S[2 * h][2], S[2 * h][3]),
                   pack_bf16x2(S[2 * h + 1][0], S[2 * h + 1][1]),
                   pack_bf16x2(S[2 * h + 1][2], S[2 * h + 1][3]));
  }
  cp_async_wait<0>();
  __syncthreads();  // E, P and the values are in

  // P.V: columns [warp kDV / 8, +kDV / 8) of this block's part (granules dl0 / 8, ...); k-steps
  // in increasing position. The B operand of k-step ks, n-tile n: value rows 16 ks + 2 tq + {0, 1}
  // (b0) and + 8 (b1) of column dl0 + 8 n + gq, by ldmatrix.trans: lanes 8 m .. 8 m + 7 address
  // rows 16 ks + 8 (m & 1) + l7 of granule dl0 / 8 + (m >> 1) (matrices m = 0..3: b0, b1 of
  // n-tile 2 nn, then of 2 nn + 1; .x2 uses m = 0, 1 only).
  float ac[kNt][4];
#pragma unroll
  for (int n = 0; n < kNt; ++n) ac[n][0] = ac[n][1] = ac[n][2] = ac[n][3] = 0.0f;
  const int dl0 = warp * (kDV / 8);
  static_assert(kNt == 1 || kNt % 2 == 0, "n-tiles in pairs, or one");
  const uint32_t vrow = sbase + Ly::kV + (l7 + mid * 8) * kRv;
#pragma unroll 4
  for (int ks = 0; ks < 16; ++ks) {
    if (ks * 16 < npw) {
      const uint4 pv = *reinterpret_cast<const uint4*>(smem + Ly::kP + (ks * 32 + lane) * 16);
      const uint32_t pf[4] = {pv.x, pv.y, pv.z, pv.w};
      if constexpr (kNt == 1) {
        uint32_t b[2];
        ldmatrix_x2_trans(b, vrow + ks * 16 * kRv + (((dl0 / 8) ^ l7) << 4));
        mma_bf16_16816(ac[0], pf, b[0], b[1]);
      } else {
#pragma unroll
        for (int nn = 0; nn < kNt / 2; ++nn) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, vrow + ks * 16 * kRv + (((dl0 / 8 + 2 * nn + hi) ^ l7) << 4));
          mma_bf16_16816(ac[2 * nn], pf, b[0], b[1]);
          mma_bf16_16816(ac[2 * nn + 1], pf, b[2], b[3]);
        }
      }
    }
  }
  const bool has[2] = {chunk_has_keys(lo0, np0), chunk_has_keys(lo1, np1)};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (!has[r]) continue;
    const int64_t idx = orow[r] * a.n_chunks + c;
#pragma unroll
    for (int n = 0; n < kNt; ++n)
      *reinterpret_cast<float2*>(a.part_acc + idx * HD + dz * kDV + dl0 + n * 8 + 2 * tq) =
          make_float2(ac[n][2 * r], ac[n][2 * r + 1]);
  }
  if (warp == 0 && dz == 0) {
    // l_c: lane j sums positions p mod 8 in {2j, 2j + 1} in increasing p, then the quad tree.
    float sum[2] = {0.0f, 0.0f};
#pragma unroll 8
    for (int jt = 0; jt < 32; ++jt) {
      if (jt * 8 < npw) {
        const float4 e4 = *reinterpret_cast<const float4*>(smem + Ly::kE + (jt * 32 + lane) * 16);
        sum[0] = __fadd_rn(sum[0], e4.x);
        sum[0] = __fadd_rn(sum[0], e4.y);
        sum[1] = __fadd_rn(sum[1], e4.z);
        sum[1] = __fadd_rn(sum[1], e4.w);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      sum[r] = __fadd_rn(sum[r], __shfl_xor_sync(0xffffffffu, sum[r], 1));
      sum[r] = __fadd_rn(sum[r], __shfl_xor_sync(0xffffffffu, sum[r], 2));
      if (has[r] && tq == 0) {
        const int64_t idx = orow[r] * a.n_chunks + c;
        a.part_ml[idx * 2] = mx[r];
        a.part_ml[idx * 2 + 1] = sum[r];
      }
    }
  }
  __syncthreads();  // shared memory is reused by a following run_decode
}

// Decode launch: block (c, (rb * n_kv_heads + kh) * DS + dz), rows [rb R, rb R + R), R G <= 16.
template <int HD, int DS>
__global__ void __launch_bounds__(256, 1) attn_decode(AttnArgs a) {
  pdl_launch_dependents();  // PDL (common.cuh)
  extern __shared__ __align__(128) uint8_t smem[];
  const int c = blockIdx.x, dz = blockIdx.y % DS, y = blockIdx.y / DS;
  const int rb = y / a.n_kv_heads, kh = y % a.n_kv_heads;
  const int t0 = rb * a.rows, nr = min(a.rows, a.T - t0);
  // Before the wait, only L1 prefetches (no value is read): the rows' key counts and the first
  // row's block-table entries for this chunk, the two dependent round trips that come before the
  // first key load. Both are the step's uploaded inputs, complete before its first kernel ran;
  // the loads that use them still come after the wait.
  if (static_cast<int>(threadIdx.x) < nr)
    asm volatile("prefetch.global.L1 [%0];" ::"l"(a.n_keys + t0 + threadIdx.x));
  if (a.table_stride > 0) {
    const int64_t b = min(static_cast<int64_t>((c * kChunk + threadIdx.x) / a.block_tokens),
                          a.table_stride - 1);
    asm volatile("prefetch.global.L1 [%0];" ::"l"(a.block_tables + t0 * a.table_stride + b));
  }
  pdl_wait();
  if (!rows_have_keys_in_chunk(a, t0, nr, c)) return;
  int tref;
  if (rows_share(a, t0, nr, tref)) {
    run_decode<HD, DS>(smem, a, t0, nr, kh, tref, c, dz);
  } else {
    for (int r = 0; r < nr; ++r)
      if (rows_have_keys_in_chunk(a, t0 + r, 1, c))
        run_decode<HD, DS>(smem, a, t0 + r, 1, kh, t0 + r, c, dz);
  }
}

}  // namespace

template <int HD, int DS>
bool launch_decode_parts(const AttnArgs& a, int64_t nrb) {
  constexpr int kSmem = DecLayout<HD, DS>::kBytes;
  if (kSmem > smem_optin()) return false;
  allow_smem<attn_decode<HD, DS>>(kSmem);
  const dim3 grid(static_cast<unsigned>(a.n_chunks), static_cast<unsigned>(nrb * a.n_kv_heads * DS));
  launch("attn_decode", attn_decode<HD, DS>, grid, 256, kSmem, a);
  return true;
}

template <int HD>
bool launch_decode(AttnArgs& a, int64_t T, int rows_override, int path_override) {
  // One 16-row tile per block, the chunk spread over the block's 8 warps.
  const int rmax = 16 / a.group;
  a.rows = a.rows_per_block(rmax, rmax, rows_override);
  const int64_t nrb = (T + a.rows - 1) / a.rows;
  // The value columns over DS blocks: one block per chunk at head_dim <= 128 (DS 2 only when
  // forced, path 4: one was faster at every length measured, even where DS 2 doubles the blocks
  // of a short context; H200, T = 1, Qwen3-8B heads, attn_merge after it: 512 keys 8.55 vs 9.05
  // us, 2048: 9.77 vs 9.97, 2176: 10.89 vs 12.13, 4096: 12.85 vs 15.0, 8192: 24.4 vs 29.3);
  // head_dim 256 always two (a chunk's keys and all its values, 256 KiB, do not fit: keys and
  // half the values, 203 KiB) and 512 four (half the keys at a time and a quarter of the values,
  // 210 KiB).
  if constexpr (HD == 512) {
    return launch_decode_parts<HD, 4>(a, nrb);
  } else if constexpr (HD == 256) {
    return launch_decode_parts<HD, 2>(a, nrb);
  } else if constexpr (HD == 128) {
    if (path_override == 4) return launch_decode_parts<HD, 2>(a, nrb);
    return launch_decode_parts<HD, 1>(a, nrb);
  } else {
    return launch_decode_parts<HD, 1>(a, nrb);
  }
}

template bool launch_decode<64>(AttnArgs&, int64_t, int, int);
template bool launch_decode<128>(AttnArgs&, int64_t, int, int);
template bool launch_decode<256>(AttnArgs&, int64_t, int, int);
template bool launch_decode<512>(AttnArgs&, int64_t, int, int);

}  // namespace lockstep::kernels::cuda::attn
