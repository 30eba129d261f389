// Shared pieces of the GPU attention kernels: attention.cu (the split and walk launches, the
// merge, the launch choice) and attention_decode.cu (the decode kernel). The schedule they all
// follow is stated at the top of attention.cu.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mma.cuh"

namespace lockstep::kernels::cuda::attn {

using namespace detail;

constexpr int kChunk = static_cast<int>(kAttentionChunk);
constexpr int kMaxGroup = 16;     // query heads per KV head supported
constexpr int kSubElems = 4096;   // elements per staged sub-tile (8 KiB of BF16)
constexpr int kSplitMaxT = 64;    // T at or below which rows take the split launch (attention_kernels.cuh: run)
// The split launch's partials ([T][n_heads][n_chunks][HD + 2] floats) a call of many items
// (rows_hint) may use before it takes the walk instead: 256 decode rows of 32 heads over 16k keys.
constexpr int64_t kSplitMaxPartBytes = int64_t{256} << 20;

// The chunk geometry of one head_dim. A staged sub-tile is kSubElems BF16 elements whatever the
// head_dim: keys as kSub positions of kKc columns (whole rows up to head_dim 256; at 512 each
// position group is two sub-tiles, d in [0, 256) then [256, 512), so a score still receives its
// k-steps in increasing d), values as kSubV positions of kVc columns (whole rows up to 256, each
// pass reading its kDh of them; at 512 pass ps's kDh columns only, so no value is staged twice).
// Keeping sub-tiles at 8 KiB is what lets head_dim 512 fit the shared memory of every supported
// device (Layout, attention.cu's launch_walk / launch_split).
template <int HD>
struct Geo {
  static constexpr int kKc = HD < 256 ? HD : 256;    // key columns per sub-tile
  static constexpr int kKparts = HD / kKc;           // key sub-tiles per position group: 1 or 2
  static constexpr int kSub = kSubElems / kKc;       // positions per key sub-tile: 64, 32, 16, 16
  static constexpr int kSpc = kChunk / kSub;         // key position groups per chunk: 4, 8, 16, 16
  static constexpr int kNk = kSpc * kKparts;         // key sub-tiles per chunk
  static constexpr int kDh = HD < 128 ? HD : 128;    // head_dim columns per P.V pass
  static constexpr int kPasses = HD / kDh;           // 1, 1, 2, 4
  static constexpr int kVc = HD <= 256 ? HD : kDh;   // value columns per sub-tile
  static constexpr int kSubV = kSubElems / kVc;      // positions per value sub-tile: 64, 32, 16, 32
  static constexpr int kSpcV = kChunk / kSubV;       // value sub-tiles per chunk and pass
  static constexpr int kNst = kNk + kPasses * kSpcV; // sub-tiles per chunk: keys, then values
  static constexpr int kKt = kKc / 16;               // k-steps of q . k per key sub-tile
  static constexpr int kNts = kSub / 8;              // 8-position score tiles per key sub-tile
  static constexpr int kQRowBytes = HD * 2;          // one BF16 q row in shared memory
  static constexpr int kRowBytes = kKc * 2;          // one key sub-tile row
  static constexpr int kVRowBytes = kVc * 2;         // one value sub-tile row
  static constexpr int kWalkWarps = HD <= 128 ? 8 : (HD <= 256 ? 4 : 2);
  static constexpr int kSplitWarps = HD <= 256 ? 8 : 4;  // the split launch (attn_split)
  static_assert(kSub % 16 == 0 && kSubV % 16 == 0 && kSpc >= 4, "sub-tile geometry");
  static_assert(kKc * kKparts == HD && kDh * kPasses == HD, "columns covered");
  static_assert(kVc == HD || kVc == kDh, "a value sub-tile serves whole passes");
};

// Shared memory of one block (byte offsets). Key / value sub-tiles arrive by cp.async, already
// BF16, straight into a ring of kStages swizzled slots, kStages - 1 sub-tiles in flight: 4 slots
// for the walk (as many sub-tiles in flight as its FP32 ring had; 8 slots made ptxas spill in
// the head_dim 128 walk, which already holds 255 registers), 16 for the split launch (few
// blocks, each must keep many bytes in flight), at most the chunk's sub-tiles. kStages divides
// kNst, so chunk-relative sub-tile j always sits in slot j % kStages.
// ST (split launch only): fewer slots where the device's shared memory does not hold 16
// (attention.cu, run); 0 is the default. Slots change how far loads run ahead, never the math.
template <int HD, int NW, bool WALK, int ST = 0>
struct Layout {
  static constexpr int kStages = WALK ? 4 : (ST ? ST : (Geo<HD>::kNst < 16 ? Geo<HD>::kNst : 16));
  static constexpr int kThreads = NW * 32;
  static constexpr int kSlotBytes = kSubElems * 2;  // a key or value sub-tile (Geo)
  static constexpr int kRing = 0;                                   // [kStages] BF16 sub-tiles
  static constexpr int kQ = kRing + kStages * kSlotBytes;           // [NW * 16][HD] BF16 q
  static constexpr int kA = kQ + NW * 16 * HD * 2;                  // walk: A, per thread
  static constexpr int kOff = kA + (WALK ? NW * 16 * HD * 4 : 0);   // [2][256] int64 offsets
  static constexpr int kBytes = kOff + 2 * kChunk * 8;
  static constexpr int kPieces = kSubElems / 8 / kThreads;          // 16-byte pieces per thread
  static_assert(kSubElems / 8 % kThreads == 0, "pieces per thread");
  static_assert(Geo<HD>::kNst % kStages == 0, "slots follow j");
  static_assert(kBytes <= 227 * 1024, "shared memory of one block");
};

struct AttnArgs {
  const float* q;
  const int32_t* block_tables;
  int64_t table_stride;
  const int32_t* n_keys;
  int T, n_heads, n_kv_heads, group, block_tokens, n_chunks;
  int window;  // > 0: row t sees positions [max(0, n_keys[t] - window), n_keys[t]) (first_key)
  int rows;  // query rows per block (rows * group <= 16 * warps)
  int rows_hint;  // > 0: rows come in items of at most this many (host-side launch choice only)
  // Query rows per block for a launch that holds at most `rmax`: a test's override, else
  // `preferred` capped at an item's rows (a block then holds one item, whose rows share keys).
  int rows_per_block(int rmax, int preferred, int override_rows) const {
    if (override_rows > 0) return override_rows < rmax ? override_rows : rmax;
    const int r = preferred < rmax ? preferred : rmax;
    return rows_hint > 0 && rows_hint < r ? rows_hint : r;
  }
  const uint16_t* k;  // BF16 cache (kv_write rounded it)
  const uint16_t* v;
  float scale;
  float* out;       // final output (merge / walk)
  float* part_acc;  // [T][n_heads][n_chunks][HD] (split)
  float* part_ml;   // [T][n_heads][n_chunks][2]
};

// Byte offset of 16-byte chunk c of row r in a tile of `row_bytes` rows (>= 128), XOR-swizzled
// so the 8 rows an ldmatrix reads hit 8 different bank groups.
__device__ __forceinline__ uint32_t swz(int r, int c, int row_bytes) {
  return static_cast<uint32_t>(r * row_bytes + ((c ^ (r & 7)) << 4));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

// f(std::integral_constant<int, 0>{}), ..., f(std::integral_constant<int, N - 1>{}) in order.
template <typename F, int... Js>
__device__ __forceinline__ void for_each_const(F&& f, std::integer_sequence<int, Js...>) {
  (f(std::integral_constant<int, Js>{}), ...);
}
template <int N, typename F>
__device__ __forceinline__ void for_each_const(F&& f) {
  for_each_const(f, std::make_integer_sequence<int, N>{});
}

// Shared-memory accesses through 32-bit addresses (generic pointers cost two registers each).
__device__ __forceinline__ float lds_f(uint32_t a) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ void sts_f(uint32_t a, float x) {
  asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(a), "f"(x));
}
__device__ __forceinline__ void sts_s64(uint32_t a, int64_t x) {
  asm volatile("st.shared.s64 [%0], %1;\n" ::"r"(a), "l"(x));
}
__device__ __forceinline__ int64_t lds_s64(uint32_t a) {
  int64_t v;
  asm volatile("ld.shared.s64 %0, [%1];\n" : "=l"(v) : "r"(a));
  return v;
}

// ldmatrix addresses. Every ldmatrix row in the attention kernels is a multiple of 8 plus
// lane & 7, so its swizzle term is lane & 7 and a 16-byte chunk C (even) lands at ((C ^ x) << 4)
// for a per-lane x < 8: that is (C & ~7) * 16 (an immediate) + xo[(C & 7) / 2] (one of four
// registers). xq serves the operands whose lanes add hi = lane >> 4 to the chunk, xk those adding
// mid = (lane >> 3) & 1.
__device__ __forceinline__ void lane_chunks(int l7, int hi, int mid, uint32_t (&xq)[4],
                                            uint32_t (&xk)[4]) {
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    xq[m] = static_cast<uint32_t>(((2 * m) ^ (hi ^ l7)) << 4);
    xk[m] = static_cast<uint32_t>(((2 * m) ^ (mid ^ l7)) << 4);
  }
}
__device__ __forceinline__ uint32_t chunk_off(const uint32_t (&xo)[4], int C) {
  return static_cast<uint32_t>((C & ~7) << 4) + xo[(C & 7) >> 1];
}

// The first position a row with nk keys sees: 0, or the start of its sliding window. A function
// of the row's own position: masking below it in every chunk (and leaving out chunks wholly
// below it) gives the row's bits whatever else shares its tile or launch.
__host__ __device__ __forceinline__ int first_key(int window, int nk) {
  return window > 0 && nk > window ? nk - window : 0;
}

// The two query rows a thread's MMA elements belong to (virtual rows vr0 and vr0 + 8 of a block
// whose VG = rows * G virtual rows are (query row t0 + vr / G, head kh * G + vr % G)): their key
// counts and output rows (0 keys and row -1 past VG). Every attention kernel sets its rows up here.
// Also their first keys (first_key; 0 past VG).
__device__ __forceinline__ void thread_rows(const AttnArgs& a, int t0, int kh, int G, int VG,
                                            int vr0, int (&nk_row)[2], int64_t (&orow)[2],
                                            int (&fk_row)[2]) {
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int vr = vr0 + 8 * e;
    if (vr < VG) {
      const int r = vr / G, g = vr % G;
      nk_row[e] = a.n_keys[t0 + r];
      orow[e] = static_cast<int64_t>(t0 + r) * a.n_heads + kh * G + g;
    } else {
      nk_row[e] = 0;
      orow[e] = -1;
    }
    fk_row[e] = first_key(a.window, nk_row[e]);
  }
}

// Whether a row with chunk-relative key range [lo, np) has a position in the chunk.
__device__ __forceinline__ bool chunk_has_keys(int lo, int np) { return np > 0 && lo < kChunk; }

// The softmax steps of one 8-position score tile that every attention kernel takes alike (the
// decode kernel and the walk/split kernel must agree bit for bit, so both call these). A thread
// holds the tile's elements e = 0..3 of mma.m16n8: rows gq (e < 2) and gq + 8 (e >= 2), position
// 8 jt + 2 tq + (e & 1); the two rows' own positions in the chunk are [lo0, np0) and
// [lo1, np1) (lo < 0 or 0 without a sliding window).
__device__ __forceinline__ int tile_pos(int jt, int tq, int e) { return jt * 8 + 2 * tq + (e & 1); }
__device__ __forceinline__ bool row_pos(int pos, int e, int lo0, int lo1, int np0, int np1) {
  return pos < (e < 2 ? np0 : np1) && pos >= (e < 2 ? lo0 : lo1);
}
// score = S * scale (one FP32 multiply) in place, folded into the rows' running max over the
// rows' own positions.
__device__ __forceinline__ void scale_tile_max(float (&s)[4], int jt, int tq, int lo0, int lo1,
                                               int np0, int np1, float scale, float (&mx)[2]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float sc = __fmul_rn(s[e], scale);
    s[e] = sc;
    if (row_pos(tile_pos(jt, tq, e), e, lo0, lo1, np0, np1)) mx[e >> 1] = fmaxf(mx[e >> 1], sc);
  }
}
// The max over the quad of threads that share a row (lanes differing in bits 0 and 1).
__device__ __forceinline__ float quad_max(float m) {
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
  return fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
}
// e = exp(score - row max) in place; 0 outside the row's positions.
__device__ __forceinline__ void exp_tile(float (&s)[4], int jt, int tq, int lo0, int lo1, int np0,
                                         int np1, const float (&mx)[2]) {
#pragma unroll
  for (int e = 0; e < 4; ++e)
    s[e] = row_pos(tile_pos(jt, tq, e), e, lo0, lo1, np0, np1)
               ? exp_f32(__fsub_rn(s[e], mx[e >> 1]))
               : 0.0f;
}

// exp_f32 (common.cuh), bit for bit, without branches. exp_f32's early returns make every call
// its own basic block (the PTX branches around each one), so the compiler cannot interleave the
// dependent polynomial chains of several elements; here the polynomial runs on x, or on 0 where
// x is NaN or out of range, and the special results are selected afterwards. rintf and the
// float-to-int conversion become one add of 1.5 * 2^23: for |t| < 2^22 the sum lies in
// [2^23, 2^24), spaced by 1 and rounded to nearest even (1.5 * 2^23 is even), so sum - 1.5 * 2^23
// is rintf(t) and the sum's bits b less 0x4b400000 are the integer e (|t| <= 150 in range). The
// one difference, n = +0 where rintf gives -0, changes r = fma(n, c, x) only for x = -0, where
// the polynomial still gives exactly 1. NONPOS: x is never > 0 (a score less its row's max: the
// max is an fmaxf over the same scores, so only NaN or x <= 0 arrive), and the x > 88.7 test
// goes. Equal to exp_f32 on all 2^32 inputs, NONPOS on all but the positive ones
// (testing::attention_exp_mismatches; also checked on the CPU with the same operations).
template <bool NONPOS = false>
__device__ __forceinline__ float exp_f32_select(float x) {
  const bool in = NONPOS ? x >= -103.97208f : (x >= -103.97208f && x <= 88.72283935546875f);
  const float xr = in ? x : 0.0f;  // NaN too
  const float big = __fadd_rn(__fmul_rn(xr, 1.44269504088896341f), 12582912.0f);
  const float n = __fsub_rn(big, 12582912.0f);
  const float p = exp_poly_f32(xr, n);
  // e1 = floor(e / 2) where exp_f32 truncates: p 2^e1 is exact either way (e1 >= -75), so the one
  // rounding is the second product's, of the same p 2^e. The scale factors' bits straight from b
  // (mod 2^32; 0x4b400000 << 22 is 0 there): (e1 + 127) << 23 = ((b >> 1) << 23) + (127 << 23),
  // and (e2 + 127) << 23 = (e << 23) - (e1 << 23) + (127 << 23) = (b << 23) + (254 << 23) - X1.
  // (Two integer multiply-adds: left to itself the compiler makes shifts, a mask and adds.)
  const uint32_t b = __float_as_uint(big);
  uint32_t x1, x2;
  asm("mad.lo.u32 %0, %1, 8388608, 1065353216;" : "=r"(x1) : "r"(b >> 1));
  asm("mad.lo.u32 %0, %1, 8388608, 2130706432;" : "=r"(x2) : "r"(b));
  x2 -= x1;
  const float y = __fmul_rn(__fmul_rn(p, __uint_as_float(x1)), __uint_as_float(x2));
  if constexpr (NONPOS) {
    return in ? y : (x < 0.0f ? 0.0f : x);
  } else {
    const float sp = x > 0.0f ? __int_as_float(0x7f800000) : (x < 0.0f ? 0.0f : x);
    return in ? y : sp;
  }
}

// The online-softmax merge of one chunk into (M, L, A), as attn_merge and the walk both do it.
__device__ __forceinline__ void merge_weights(float M, float mc, float& Mn, float& alpha,
                                              float& beta) {
  Mn = fmaxf(M, mc);
  alpha = exp_f32(__fsub_rn(M, Mn));
  beta = exp_f32(__fsub_rn(mc, Mn));
}
__device__ __forceinline__ float merge_one(float X, float xc, float alpha, float beta) {
  return __fadd_rn(__fmul_rn(X, alpha), __fmul_rn(xc, beta));
}

// Block rows [t0, t0 + nr): the row with the most keys, and whether every row's block-table
// entries for its own keys equal that row's (then the rows share each staged key and value).
__device__ inline bool rows_share(const AttnArgs& a, int t0, int nr, int& tref) {
  __shared__ int shared_ok;
  tref = t0;
  for (int r = 1; r < nr; ++r)
    if (a.n_keys[t0 + r] > a.n_keys[tref]) tref = t0 + r;
  if (nr <= 1) return true;
  if (threadIdx.x == 0) shared_ok = 1;
  __syncthreads();
  const int bt = a.block_tokens;
  for (int r = 0; r < nr; ++r) {
    const int nb = (a.n_keys[t0 + r] + bt - 1) / bt;
    for (int b = threadIdx.x; b < nb; b += blockDim.x)
      if (a.block_tables[(t0 + r) * a.table_stride + b] != a.block_tables[tref * a.table_stride + b])
        shared_ok = 0;
  }
  __syncthreads();
  const bool ok = shared_ok != 0;
  __syncthreads();  // shared_ok is read by all before anyone may reuse it
  return ok;
}

__host__ __device__ inline int chunks_of(int n_keys) { return (n_keys + kChunk - 1) / kChunk; }

// Whether some row of [t0, t0 + nr) sees a position of chunk c (below n_keys, at or past its
// first key): a block or a row without any skips the chunk.
__device__ inline bool rows_have_keys_in_chunk(const AttnArgs& a, int t0, int nr, int c) {
  for (int r = 0; r < nr; ++r) {
    const int nk = a.n_keys[t0 + r];
    if (nk > c * kChunk && first_key(a.window, nk) < (c + 1) * kChunk) return true;
  }
  return false;
}

inline int sm_count() { return device_caps().sm_count; }
inline int smem_optin() { return device_caps().smem_optin; }
// The least opt-in shared memory per block of the devices the backend supports (sm_86, sm_89,
// sm_120: 99 KiB): smaller-memory variants stop at one that fits it.
constexpr int kMinSmemOptin = 99 * 1024;

template <auto Kernel>
void allow_smem(int bytes) {
  static const bool done = [&] {
    check(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
          "attention: set shared memory limit");
    return true;
  }();
  (void)done;
}

// The decode launch (attention_decode.cu), head_dim 64 or 128: chunk partials into a.part_acc /
// a.part_ml for attention.cu's merge; sets a.rows.
// False (nothing launched) when its shared memory does not fit the device (the split launch
// then takes the rows, with the same bits).
template <int HD>
bool launch_decode(AttnArgs& a, int64_t T, int rows_override, int path_override);

// The launches of attention.cu's dispatcher, per head_dim (attention_kernels.cuh, instantiated in
// attention_hd64.cu ... attention_hd512.cu), and what they share with it.
extern int rows_override;  // testing::set_attention_rows_override
extern int path_override;  // testing::set_attention_path_override
// No variant of a launch fits the device's shared memory: an error naming head_dim and device.
[[noreturn]] void refuse_smem(const char* launch_name, int hd, int bytes);
// Attention of T rows at head_dim HD: the walk, or split (or the decode kernels) + merge.
template <int HD>
void run_attention(AttnArgs a, int64_t T);

}  // namespace lockstep::kernels::cuda::attn
