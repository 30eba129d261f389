// The integer-dot quantized linear (kernels/quant_int8.h) for every Highway target, dispatched at
// run time: y = x W^T from int8 activation blocks (cpu/act_quant.cpp) and 4- or 8-bit codes.
//
// Only the integer sums isum_g are computed in target-specific ways, and they are exact, so every
// target gives ref::int8_linear_cols's bits. The float part is the same operations in the same
// order everywhere: per chunk of 16 groups one vector of 16 group sums (lane j = group 16c + j:
// the schedule's lane g mod 16), p = d * float(isum), two FMAs into the 16 lanes, fold16 at the
// end.
//
// Integer part (x86: AVX2, AVX-512, AVX-512 VNNI). A "unit" is one vector of int32 lanes, lane l
// holding the sum of a fixed run of consecutive elements (8 for 4-bit, 4 for 8-bit):
//  - 4-bit: one full-vector load of packed codes; low nibbles (even elements) and high nibbles
//    (odd elements) are masked apart and multiplied with the activations in the same order
//    (Int8Acts::qnib: 64 even then 64 odd per 128 elements), so lane l still sums elements
//    [8l, 8l + 8).
//  - 8-bit: codes and activations in element order, lane l sums [4l, 4l + 4).
//  - VNNI: vpdpbusd (unsigned codes x signed activations, 4 products per lane, no saturation).
//  - AVX2 / AVX-512 without VNNI: vpmaddubsw + vpmaddwd; exact for 4-bit codes (pair sums <=
//    2 * 15 * 127); 8-bit codes would saturate, so they enter as (w - 128), signs moved onto the
//    activation (|w - 128| <= 128, pair sums <= 2 * 128 * 127), and 128 * sum(q) is added back
//    per group.
// Units of one group are summed lane-wise; then adjacent lanes are added pairwise (ConcatEven +
// ConcatOdd) until each group is one lane, which leaves the 16 group sums in order. The tree is
// walked depth first so a tile of R rows x C columns keeps few vectors live.
//
// Shapes the integer part does not cover (group sizes other than 32..256 at 4 bits or 16..128 at
// 8 bits, K not a multiple of 128 (4-bit) or 64 (8-bit), targets other than the three above) run
// ref::int8_linear_cols: the same bits, slowly.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL  // compile the AVX-512 VNNI target (Highway leaves it out by default)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/linear_quant_int8.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/cpu_tuning.h"
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/fma_targets.h"
#include "kernels/cpu/quant_panels.h"
#include "kernels/cpu/vec_math-inl.h"
#include "kernels/ops.h"
#include "kernels/quant_format.h"
#include "kernels/quant_int8.h"
#include "kernels/ref/quant_int8_ref.h"
#include "kernels/schedule.h"

HWY_BEFORE_NAMESPACE();
// Highway 1.0.3's AVX3_DL target string names avxvnni (the VEX form) but not avx512vnni, which
// vpdpbusd on zmm needs; the runtime check for AVX3_DL does test AVX512-VNNI.
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#pragma GCC target("avx512vnni")
#elif HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_CLANG
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#endif
namespace lockstep::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#define LOCKSTEP_INT8_SIMD \
  (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)

#if LOCKSTEP_INT8_SIMD
using DI = hn::CappedTag<int32_t, kLanes>;
using VI = decltype(hn::Zero(DI()));
using DF = hn::Rebind<float, DI>;
using VF = decltype(hn::Zero(DF()));
using DB = hn::Repartition<uint8_t, DI>;  // the same vector as bytes
using VB = decltype(hn::Zero(DB()));
constexpr int kN = static_cast<int>(hn::MaxLanes(DI()));
constexpr int kOut = kLanes / kN;  // vectors holding one chunk's 16 group sums
constexpr bool kVnni = HWY_TARGET == HWY_AVX3_DL;
constexpr int64_t kChunk = kLanes;  // groups per chunk

// 8-bit codes enter the non-VNNI dot as (w - 128): the group sums lack 128 * sum(q).
template <int Bits>
constexpr bool kOffsetCodes = Bits == 8 && !kVnni;

// Raw x86 pieces (Highway 1.0.3 has no u8 x i8 dot product).
#if HWY_TARGET == HWY_AVX2
HWY_INLINE VI madd_ones(__m256i p16) {
  return VI{_mm256_madd_epi16(p16, _mm256_set1_epi16(1))};
}
HWY_INLINE __m256i maddubs(VB a, VB b) { return _mm256_maddubs_epi16(a.raw, b.raw); }
HWY_INLINE __m256i add16(__m256i a, __m256i b) { return _mm256_add_epi16(a, b); }
// b with the sign of s applied (0 where s is 0), both as int8.
HWY_INLINE VB sign8(VB b, VB s) { return VB{_mm256_sign_epi8(b.raw, s.raw)}; }
HWY_INLINE VB abs8(VB s) { return VB{_mm256_abs_epi8(s.raw)}; }
#else
HWY_INLINE VI madd_ones(__m512i p16) {
  return VI{_mm512_madd_epi16(p16, _mm512_set1_epi16(1))};
}
HWY_INLINE __m512i maddubs(VB a, VB b) { return _mm512_maddubs_epi16(a.raw, b.raw); }
HWY_INLINE __m512i add16(__m512i a, __m512i b) { return _mm512_add_epi16(a, b); }
// No vpsignb on zmm: negate where s < 0 (where s == 0 the code |s| is 0, so b's value is moot).
HWY_INLINE VB sign8(VB b, VB s) {
  const __mmask64 neg = _mm512_movepi8_mask(s.raw);
  return VB{_mm512_mask_sub_epi8(b.raw, neg, _mm512_setzero_si512(), b.raw)};
}
HWY_INLINE VB abs8(VB s) { return VB{_mm512_abs_epi8(s.raw)}; }
#endif

// acc lane l += sum of the 4 products of bytes 4l..4l+3 (codes unsigned, x signed).
HWY_INLINE VI dot4(VI acc, VB codes, VB x) {
#if HWY_TARGET == HWY_AVX3_DL
  return VI{_mm512_dpbusd_epi32(acc.raw, codes.raw, x.raw)};
#else
  return hn::Add(acc, madd_ones(maddubs(codes, x)));
#endif
}
// Two 4-bit halves (codes <= 15) into one accumulator: two vpdpbusd with VNNI, else the pair
// sums added in int16 first (at most 4 * 15 * 127) and widened once.
HWY_INLINE VI dot4_pair(VI acc, VB lo, VB xlo, VB hi, VB xhi) {
#if HWY_TARGET == HWY_AVX3_DL
  return dot4(dot4(acc, lo, xlo), hi, xhi);
#else
  return hn::Add(acc, madd_ones(add16(maddubs(lo, xlo), maddubs(hi, xhi))));
#endif
}
// 8-bit codes: exact dot4 (VNNI) or the dot of (w - 128) (see kOffsetCodes).
HWY_INLINE VI dot4_u8(VI acc, VB codes, VB x) {
  if constexpr (kVnni) {
    return dot4(acc, codes, x);
  } else {
    const VB offset = hn::Xor(codes, hn::Set(DB(), uint8_t{0x80}));  // w - 128 as int8
    return dot4(acc, abs8(offset), sign8(x, offset));
  }
}

// Everything a tile needs about one call.
struct Call {
  const Int8Acts* a;
  const Weight* w;
  int64_t groups;     // per weight row
  int64_t row_bytes;  // code bytes per weight row
  // One-row calls stream the codes once from DRAM and are bound by the lines in flight, so they
  // ask for them ahead (cpu_tuning.h), in one of two ways as each vendor was measured:
  //  - `prefetch` (locality t2, t1 or t0, i.e. Intel by default): per chunk, the next tile's codes
  //    of that chunk, with prefetcht2.
  //  - `ahead` > 0 (locality nta, i.e. AMD and others by default): like the float GEMV
  //    (cpu/linear.cpp), every line read asks with prefetchnta for the line `ahead` bytes on in
  //    the same row, past the row's end in the next tile's rows (tile rows are contiguous), so the
  //    streams run gemv_prefetch_bytes() ahead in total across tile boundaries. On the AMD VM
  //    (Zen 5, one thread, K and N 1024..6144, weights from DRAM) the hardware prefetcher alone
  //    kept this kernel at 15 GB/s (8-bit) and 12 GB/s (4-bit) of the 38 GB/s a core reads,
  //    though it runs at 60 and 46 GB/s from cache; with this 24 to 28 GB/s either way, and
  //    6 to 16 KB ahead all measured alike (docs/design-notes.md, the int8 quant dot).
  // On panels (quant_panels.h) a tile is one stream: per chunk, the chunk `ahead` bytes on in it,
  // with prefetcht2 where `prefetch` is set, else prefetchnta.
  bool prefetch;
  int64_t ahead;  // bytes per row (on panels: per stream); 0: none
};

template <int R, int C>
struct Acc {
  VI v[R][C];
};

// Elements summed by one int32 lane of a unit, and elements per unit.
template <int Bits>
constexpr int64_t kPerLane = Bits == 4 ? 8 : 4;
template <int Bits>
constexpr int64_t kUnit = kPerLane<Bits> * kN;

// Code bytes of one unit in a weight row.
template <int Bits>
constexpr int64_t kUnitBytes = kUnit<Bits> * Bits / 8;

// The `ahead` prefetch (see Call) for the lines of unit u in the C rows of the tile at w.
template <int Bits, int C>
HWY_INLINE void prefetch_ahead(const Call& c, const uint8_t* w, uint64_t u) {
  const int64_t at = static_cast<int64_t>(u) * kUnitBytes<Bits>;
  if (kUnitBytes<Bits> < 64 && at % 64 != 0) return;  // AVX2: one line per two units
  const int64_t t = at + c.ahead;  // past the row: rows of the tiles after this one
  const uint8_t* p = w + t / c.row_bytes * C * c.row_bytes + t % c.row_bytes;
  for (int j = 0; j < C; ++j) __builtin_prefetch(p + j * c.row_bytes, 0, 0);
}

// Offset of unit u's even elements in a row of Int8Acts::qnib (its odd ones are 64 further).
HWY_INLINE uint64_t nibble_offset(uint64_t u) {
  constexpr uint64_t kUnitsPerBlock = kNibbleBlock / kUnit<4>;  // 1 (AVX-512) or 2 (AVX2)
  return u / kUnitsPerBlock * kNibbleBlock + u % kUnitsPerBlock * (kUnit<4> / 2);
}

// Leaf `leaf` of the chunk whose first unit is u0: the sums of its UPL units for each (row,
// column) of the tile; zero when Full is false and the leaf lies past the row's end.
template <int Bits, int UPL, bool Full, int R, int C>
HWY_INLINE Acc<R, C> leaf(const Call& c, const uint8_t* w, const int8_t* const* x, uint64_t u0,
                          uint64_t leaf) {
  Acc<R, C> out;
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) out.v[r][j] = hn::Zero(DI());
  const uint64_t u_first = u0 + leaf * UPL;
  if (!Full && static_cast<int64_t>(u_first * kUnit<Bits>) >= c.w->cols) return out;
  const DB db;
  const hn::Repartition<int8_t, DI> ds;
  for (int i = 0; i < UPL; ++i) {
    const uint64_t u = u_first + i;
    if (R == 1 && c.ahead > 0) prefetch_ahead<Bits, C>(c, w, u);
    if constexpr (Bits == 4) {
      VB lo[C], hi[C];
      const VB mask = hn::Set(db, uint8_t{15});
      for (int j = 0; j < C; ++j) {
        const VB v = hn::LoadU(db, w + j * c.row_bytes + u * (kUnit<4> / 2));
        lo[j] = hn::And(v, mask);
        hi[j] = hn::And(hn::ShiftRight<4>(v), mask);
      }
      const uint64_t at = nibble_offset(u);
      for (int r = 0; r < R; ++r) {
        const VB xlo = hn::BitCast(db, hn::LoadU(ds, x[r] + at));
        const VB xhi = hn::BitCast(db, hn::LoadU(ds, x[r] + at + kNibbleBlock / 2));
        for (int j = 0; j < C; ++j) out.v[r][j] = dot4_pair(out.v[r][j], lo[j], xlo, hi[j], xhi);
      }
    } else {
      VB q[C];
      for (int j = 0; j < C; ++j) q[j] = hn::LoadU(db, w + j * c.row_bytes + u * kUnit<8>);
      for (int r = 0; r < R; ++r) {
        const VB xv = hn::BitCast(db, hn::LoadU(ds, x[r] + u * kUnit<8>));
        for (int j = 0; j < C; ++j) out.v[r][j] = dot4_u8(out.v[r][j], q[j], xv);
      }
    }
  }
  return out;
}

// The 2^Level leaves from `first` on, adjacent lanes added pairwise Level times (lane order kept:
// the first half of the result holds the pair sums of the left subtree, the second half the
// right's).
template <int Level, int Bits, int UPL, bool Full, int R, int C>
HWY_INLINE Acc<R, C> subtree(const Call& c, const uint8_t* w, const int8_t* const* x, uint64_t u0,
                             uint64_t first) {
  if constexpr (Level == 0) {
    return leaf<Bits, UPL, Full, R, C>(c, w, x, u0, first);
  } else {
    constexpr uint64_t kHalf = uint64_t{1} << (Level - 1);
    Acc<R, C> a = subtree<Level - 1, Bits, UPL, Full, R, C>(c, w, x, u0, first);
    const Acc<R, C> b = subtree<Level - 1, Bits, UPL, Full, R, C>(c, w, x, u0, first + kHalf);
    const DI di;
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < C; ++j)
        a.v[r][j] = hn::Add(hn::ConcatEven(di, b.v[r][j], a.v[r][j]),
                            hn::ConcatOdd(di, b.v[r][j], a.v[r][j]));
    return a;
  }
}

// The 16 group sums of the chunk starting at unit u0, for each (row, column) of the tile.
template <int Bits, int LPG, int UPL, bool Full, int R, int C>
HWY_INLINE void chunk_sums(const Call& c, const uint8_t* w, const int8_t* const* x, uint64_t u0,
                           VI (&isum)[R][C][kOut]) {
  constexpr int kLevels = LPG >= 16 ? 4 : LPG >= 8 ? 3 : LPG >= 4 ? 2 : 1;
  static_assert((1 << kLevels) == LPG, "lanes per group: a power of two");
  for (int o = 0; o < kOut; ++o) {
    const Acc<R, C> s = subtree<kLevels, Bits, UPL, Full, R, C>(c, w, x, u0, uint64_t{o} * LPG);
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < C; ++j) isum[r][j][o] = s.v[r][j];
  }
}

// 16 scales (or biases) of one weight row from group g on, as float; zero past the row's groups.
// `total`: the values in the whole array (rows x groups). A row's last chunk reads on into the
// next row's values and zeroes them (rows with fewer than 16 groups, e.g. an MoE down projection
// of width 768 at group 64, are all last chunk); only the array's end takes the scalar copy.
HWY_INLINE void load_group_values(DType t, const void* p, int64_t at, int64_t valid,
                                  int64_t total, VF* out) {
  const DF df;
  if (valid < kChunk && at + kChunk > total) {
    HWY_ALIGN float buf[kChunk] = {};
    for (int64_t j = 0; j < valid; ++j) buf[j] = scalar_at(t, p, at + j);
    for (int o = 0; o < kOut; ++o) out[o] = hn::Load(df, buf + o * kN);
    return;
  }
  for (int o = 0; o < kOut; ++o) {
    if (t == DType::BF16) {
      const hn::Rebind<uint16_t, DF> d16;
      const auto bits = hn::PromoteTo(hn::RebindToUnsigned<DF>(),
                                      hn::LoadU(d16, static_cast<const uint16_t*>(p) + at + o * kN));
      out[o] = hn::BitCast(df, hn::ShiftLeft<16>(bits));
    } else if (t == DType::F16) {
      const hn::Rebind<hwy::float16_t, DF> d16;
      out[o] = hn::PromoteTo(df, hn::LoadU(d16, static_cast<const hwy::float16_t*>(p) + at + o * kN));
    } else {
      out[o] = hn::LoadU(df, static_cast<const float*>(p) + at + o * kN);
    }
  }
  if (valid < kChunk)  // +0 past the row, as the scalar copy gives
    for (int o = 0; o < kOut; ++o)
      out[o] = hn::IfThenElseZero(hn::FirstN(df, static_cast<size_t>(std::max<int64_t>(
                                                      0, valid - int64_t{o} * int64_t{kN}))),
                                  out[o]);
}

// The float part of one chunk of 16 groups (quant_int8.h): for each (row, column) of the tile and
// each group g, p = d * float(isum), then the two FMAs into lane g mod 16 of acc; sv and bv: the
// tile's scales and biases (16 per column, zero past the row's groups).
template <int Bits, int R, int C>
HWY_INLINE void add_chunk_values(const Call& c, int64_t m, int64_t g0,
                                 const VI (&isum)[R][C][kOut], const VF (&sv)[C][kOut],
                                 const VF (&bv)[C][kOut], VF (&acc)[R][C][kOut]) {
  const DF df;
  const DI di;
  const Int8Acts& a = *c.a;
  for (int r = 0; r < R; ++r) {
    const int64_t at = (m + r) * a.blocks_padded + g0;
    for (int o = 0; o < kOut; ++o) {
      const VF dv = hn::LoadU(df, a.d.data() + at + o * kN);
      const VF ev = hn::LoadU(df, a.e.data() + at + o * kN);
      VI offset = hn::Zero(di);
      if constexpr (kOffsetCodes<Bits>)
        offset = hn::ShiftLeft<7>(hn::LoadU(di, a.sum.data() + at + o * kN));
      for (int j = 0; j < C; ++j) {
        VI is = isum[r][j][o];
        if constexpr (kOffsetCodes<Bits>) is = hn::Add(is, offset);
        const VF p = hn::Mul(dv, hn::ConvertTo(df, is));
        acc[r][j][o] = hn::MulAdd(sv[j][o], p, acc[r][j][o]);
        acc[r][j][o] = hn::MulAdd(bv[j][o], ev, acc[r][j][o]);
      }
    }
  }
}

// add_chunk_values with the scales and biases of columns n .. read from the weight's arrays.
template <int Bits, int R, int C>
HWY_INLINE void add_chunk(const Call& c, int64_t m, int64_t n, int64_t g0, int64_t valid,
                          const VI (&isum)[R][C][kOut], VF (&acc)[R][C][kOut]) {
  const Weight& wt = *c.w;
  const int64_t values = wt.rows * c.groups;  // scales (and biases) in the whole weight
  VF sv[C][kOut], bv[C][kOut];
  for (int j = 0; j < C; ++j) {
    const int64_t at = (n + j) * c.groups + g0;
    load_group_values(wt.scale_dtype, wt.scales, at, valid, values, sv[j]);
    load_group_values(wt.scale_dtype, wt.biases, at, valid, values, bv[j]);
  }
  add_chunk_values<Bits, R, C>(c, m, g0, isum, sv, bv, acc);
}

// y for the tile from its lanes: the fixed folding tree.
template <int R, int C>
HWY_INLINE void store_tile(VF (&acc)[R][C][kOut], float* y, int64_t ldy) {
  const DF df;
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) y[r * ldy + j] = vm::fold16<kOut>(df, acc[r][j]);
}

// y for R rows (m .. m+R-1) x C columns (n .. n+C-1); LPG = lanes per group in a unit's vector.
template <int Bits, int LPG, int UPL, int R, int C>
HWY_NOINLINE void tile(const Call& c, int64_t m, int64_t n, float* y, int64_t ldy) {
  const DF df;
  const Int8Acts& a = *c.a;
  const Weight& wt = *c.w;
  const int64_t G = wt.group_size;
  const uint8_t* w = static_cast<const uint8_t*>(wt.data) + n * c.row_bytes;
  const int8_t* x[R];
  for (int r = 0; r < R; ++r) x[r] = Bits == 4 ? a.row_nib(m + r) : a.row(m + r);
  VF acc[R][C][kOut];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j)
      for (int o = 0; o < kOut; ++o) acc[r][j][o] = hn::Zero(df);

  for (int64_t g0 = 0; g0 < c.groups; g0 += kChunk) {
    const int64_t valid = std::min<int64_t>(kChunk, c.groups - g0);
    const uint64_t u0 = static_cast<uint64_t>(g0 * G / kUnit<Bits>);
    if constexpr (R == 1) {
      if (c.prefetch) {  // this chunk's lines of the next tile's rows (tile rows are contiguous)
        const int64_t at = g0 * G * Bits / 8, bytes = valid * G * Bits / 8;
        for (int j = 0; j < C; ++j)
          for (int64_t b = 0; b < bytes; b += 64)
            __builtin_prefetch(w + (C + j) * c.row_bytes + at + b, 0, 1);
      }
    }
    VI isum[R][C][kOut];
    if (valid == kChunk)
      chunk_sums<Bits, LPG, UPL, true>(c, w, x, u0, isum);
    else
      chunk_sums<Bits, LPG, UPL, false>(c, w, x, u0, isum);
    add_chunk<Bits, R, C>(c, m, n, g0, valid, isum, acc);
  }
  store_tile<R, C>(acc, y, ldy);
}

// Tile shapes: enough independent accumulators to hide latency, few enough that the tree's live
// vectors stay in registers (32 on AVX-512, 16 on AVX2). They never change any element's value.
constexpr int kGemvCols = kN >= 16 ? 4 : 2;
constexpr int kRows = 2;
constexpr int kCols = kN >= 16 ? 2 : 1;

// Rows [m0, m1) x columns [n0, n1) in tiles of R x C, the edges in tiles of one row and/or one
// column: `tile.template operator()<TR, TC>(m, n)` computes the tile at (m, n).
template <int R, int C, class Tile>
HWY_INLINE void tiles(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const Tile& tile) {
  int64_t m = m0;
  for (; m + R <= m1; m += R) {
    int64_t n = n0;
    for (; n + C <= n1; n += C) tile.template operator()<R, C>(m, n);
    for (; n < n1; ++n) tile.template operator()<R, 1>(m, n);
  }
  for (; m < m1; ++m) {
    int64_t n = n0;
    for (; n + C <= n1; n += C) tile.template operator()<1, C>(m, n);
    for (; n < n1; ++n) tile.template operator()<1, 1>(m, n);
  }
}

template <int Bits, int LPG, int UPL, int R, int C>
void rows_block(const Call& c, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* y) {
  const int64_t N = c.w->rows;
  tiles<R, C>(m0, m1, n0, n1, [&]<int TR, int TC>(int64_t m, int64_t n) {
    tile<Bits, LPG, UPL, TR, TC>(c, m, n, y + m * N + n, N);
  });
}

// Group-interleaved tiles: weights whose groups are 4, 8 or 16 code words (interleaved_groups in
// quant_int8.h) in calls of interleaved_min_rows() rows or more (cpu_tuning.h). The tree above
// adds adjacent lanes for every (row, column) pair of a tile, as many shuffles as there are dot
// products (three times as many for 8-bit groups of 64). Here each block of weight rows is
// transposed once per call into a scratch where 4-byte lane j of every vector holds a code word
// of group 16c + j (Int8Acts::qgrp orders x the same way), so a group's products accumulate in
// one lane and the 16 group sums come out with no tree: the same integers either way.
// 3 x 4 on AVX-512: 12 group-sum and 12 float accumulators stay in the 32 registers with the
// activations and codes of a step (4 x 4 spilled; on the AMD VM 3 x 4 measured 92-98 tok/s of
// 4-bit Qwen3-1.7B prefill against 80-86 for 4 x 4, 2 x 4 and 2 x 8 in between).
constexpr int kGrpRows = kN >= 16 ? 3 : 2;  // activation rows per tile
constexpr int kGrpCols = kN >= 16 ? 4 : 2;  // weight rows per tile

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// On AVX-512 a chunk's 16 x W words are W vectors and one transpose network of two-table
// permutes (vpermt2d): log2(W) rounds of W permutes. Each round pairs vectors holding the same
// words of adjacent group ranges and makes two that hold both ranges and half the words each; a
// partial last chunk is read with masked loads, so its missing groups are 0.
template <int W>
struct TransposeNet {
  static constexpr int kRounds = W == 4 ? 2 : W == 8 ? 3 : 4;
  __m512i index[kRounds][2];
  TransposeNet() {
    // Layout of a round's input: n groups x m words per vector, lane = group * m + word (the
    // loaded units) or group + n * word (after a round).
    int n = kLanes / W, m = W;
    for (int r = 0; r < kRounds; ++r, n *= 2, m /= 2)
      for (int h = 0; h < 2; ++h) {
        alignas(64) int32_t v[kLanes];
        for (int l = 0; l < kLanes; ++l) {
          const int g = l % (2 * n), word = h * (m / 2) + l / (2 * n);  // output lane l
          const int local = g % n, lane = r == 0 ? local * m + word : local + n * word;
          v[l] = (g < n ? 0 : kLanes) + lane;
        }
        index[r][h] = _mm512_load_si512(v);
      }
  }
};

// One chunk: `valid` groups of W words from `at` into 16 x W words at `o`.
template <int W>
HWY_INLINE void transpose_chunk(const TransposeNet<W>& net, const uint8_t* at, int64_t valid,
                                uint32_t* o) {
  __m512i v[W];  // v[gb * WB + wb]: group block gb, word block wb
  for (int i = 0; i < W; ++i) {
    const int64_t n = std::clamp<int64_t>(valid * W - 16 * i, 0, 16);
    v[i] = _mm512_maskz_loadu_epi32(static_cast<__mmask16>((uint32_t{1} << n) - 1), at + 64 * i);
  }
  int blocks = W;  // group blocks; W / blocks word blocks
  for (int rd = 0; rd < TransposeNet<W>::kRounds; ++rd, blocks /= 2) {
    const int wb_count = W / blocks;
    __m512i t[W];
    for (int gb = 0; gb < blocks / 2; ++gb)
      for (int wb = 0; wb < wb_count; ++wb)
        for (int h = 0; h < 2; ++h)
          t[gb * 2 * wb_count + 2 * wb + h] = _mm512_permutex2var_epi32(
              v[2 * gb * wb_count + wb], net.index[rd][h], v[(2 * gb + 1) * wb_count + wb]);
    for (int i = 0; i < W; ++i) v[i] = t[i];
  }
  for (int k = 0; k < W; ++k) _mm512_storeu_si512(o + kLanes * k, v[k]);
}
#else
template <int W>
struct TransposeNet {};

// Word copies elsewhere (the transpose is shared by every row of the call).
template <int W>
HWY_INLINE void transpose_chunk(const TransposeNet<W>&, const uint8_t* at, int64_t valid,
                                uint32_t* o) {
  for (int k = 0; k < W; ++k, o += kLanes) {
    for (int64_t j = 0; j < valid; ++j) std::memcpy(o + j, at + (j * W + k) * 4, 4);
    for (int64_t j = valid; j < kLanes; ++j) o[j] = 0;
  }
}
#endif

// Rows [n0, n0 + rows) of a weight whose groups are W code words into `out`: per row, per chunk
// c, per word k, 16 words, word j = word k of group 16c + j (0 past the row's groups).
template <int W>
void transpose_groups(const TransposeNet<W>& net, const Weight& w, int64_t n0, int64_t rows,
                      int64_t chunks, uint32_t* out) {
  const int64_t groups = w.cols / w.group_size, row_bytes = w.cols * w.bits / 8;
  const uint8_t* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = src + (n0 + r) * row_bytes;
    for (int64_t ch = 0; ch < chunks; ++ch)
      transpose_chunk<W>(net, row + ch * kLanes * W * 4,
                         std::min<int64_t>(kLanes, groups - ch * kLanes),
                         out + (r * chunks + ch) * W * kLanes);
  }
}

// Where a group-interleaved tile finds its codes (and, on panels, its scales) in one chunk of
// `width` groups: word k of column j at codes + j * col + k * word (bytes; `width` uint32 a word,
// 16 but in a panel's narrow last chunk); column j's scales at values + j * value_col, its biases
// `bias` bytes on (values null: from the weight's arrays).
struct GrpChunk {
  const uint8_t* codes;
  int64_t col, word, width;
  const uint8_t* values = nullptr;
  int64_t value_col = 0, bias = 0;
};

// The codes a group-interleaved tile reads: the per-call scratch of grp_cols (column j at
// base + j * col, chunks of W words of 16 uint32 one after another), or a weight's panels
// (quant_panels.h: the tile's columns start at row `first` of the panel at base).
struct GrpCodes {
  const uint8_t* base;
  int64_t col = 0;             // scratch: bytes per column
  const PanelShape* panels = nullptr;
  int64_t first = 0;           // panels: the tile's first row in its panel

  template <int W>
  GrpChunk chunk(int64_t ch) const {
    if (!panels) return {base + ch * W * kLanes * 4, col, kLanes * 4, kLanes};
    const PanelShape& s = *panels;
    const int64_t width = s.width(ch), vb = s.value_bytes;
    const uint8_t* at = base + s.chunk_offset(ch);
    return {at + first * width * 4,
            width * 4,
            kPanelRows * width * 4,
            width,
            at + s.code_bytes(width) + first * width * vb,
            width * vb,
            s.values_bytes(width)};
  }
};

// The integer sums of one chunk for an R x C tile: x rows at x (group-interleaved order), codes
// at `g`. Narrow: the chunk's words hold fewer than 16 groups; the missing lanes are loaded as
// zero codes, so their sums are 0 as in a full chunk padded with zeros.
template <int Bits, int W, int R, int C, bool Narrow>
HWY_INLINE void grp_chunk_sums(const int8_t* const* x, int64_t ch, const GrpChunk& g,
                               VI (&isum)[R][C][kOut]) {
  const DB db;
  const DI di;
  const hn::Repartition<int8_t, DI> ds;
  constexpr int64_t kStepBytes = Bits == 4 ? 128 : 64;  // x per word: lo + hi, or the bytes
  const VB mask = hn::Set(db, uint8_t{15});
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j)
      for (int o = 0; o < kOut; ++o) isum[r][j][o] = hn::Zero(di);
  for (int o = 0; o < kOut; ++o) {
    const auto lanes = hn::FirstN(di, static_cast<size_t>(std::clamp<int64_t>(
                                          g.width - int64_t{o} * kN, 0, kN)));
    for (int k = 0; k < W; ++k) {
      const int64_t step = ch * W + k;
      VB xa[R], xb[R];  // 4-bit: x of the low and high nibbles; 8-bit: xa only
      for (int r = 0; r < R; ++r) {
        const int8_t* p = x[r] + step * kStepBytes + o * kN * 4;
        xa[r] = hn::BitCast(db, hn::LoadU(ds, p));
        if constexpr (Bits == 4) xb[r] = hn::BitCast(db, hn::LoadU(ds, p + 64));
      }
      for (int j = 0; j < C; ++j) {
        const uint8_t* p = g.codes + j * g.col + k * g.word + o * kN * 4;
        VB v;
        if constexpr (Narrow)
          v = hn::BitCast(db, hn::MaskedLoad(lanes, di, reinterpret_cast<const int32_t*>(p)));
        else
          v = hn::LoadU(db, p);
        if constexpr (Bits == 4) {
          const VB lo = hn::And(v, mask), hi = hn::And(hn::ShiftRight<4>(v), mask);
          for (int r = 0; r < R; ++r)
            isum[r][j][o] = dot4_pair(isum[r][j][o], lo, xa[r], hi, xb[r]);
        } else {
          for (int r = 0; r < R; ++r) isum[r][j][o] = dot4_u8(isum[r][j][o], v, xa[r]);
        }
      }
    }
  }
}

// y for R rows (m ..) x C columns (n ..) from the group-interleaved codes at `src`; W code words
// per group.
template <int Bits, int W, int R, int C>
HWY_NOINLINE void tile_grp(const Call& c, const GrpCodes& src, int64_t m, int64_t n, float* y,
                           int64_t ldy) {
  const DF df;
  const Int8Acts& a = *c.a;
  const int8_t* x[R];
  for (int r = 0; r < R; ++r) x[r] = a.row_grp(m + r);
  VF acc[R][C][kOut];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j)
      for (int o = 0; o < kOut; ++o) acc[r][j][o] = hn::Zero(df);
  const int64_t chunks = a.blocks_padded / kChunk;
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const GrpChunk g = src.template chunk<W>(ch);
    // One-row calls on panels: the panel stream `ahead` bytes on (the next tiles' panels), a
    // chunk's worth per chunk, with the vendor's locality (Call::prefetch: t2, else nta).
    if (R == 1 && c.ahead > 0 && src.panels) {
      const int64_t bytes = src.panels->chunk_bytes(g.width);
      const uint8_t* p = src.base + src.panels->chunk_offset(ch) + c.ahead;
      if (c.prefetch)
        for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, 0, 1);
      else
        for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, 0, 0);
    }
    VI isum[R][C][kOut];
    if (g.width == kLanes)
      grp_chunk_sums<Bits, W, R, C, false>(x, ch, g, isum);
    else
      grp_chunk_sums<Bits, W, R, C, true>(x, ch, g, isum);
    const int64_t g0 = ch * kChunk, valid = std::min<int64_t>(kChunk, c.groups - g0);
    if (g.values) {
      // A narrow chunk's 16-value loads read on into the next values (the panels' tail pads the
      // last), which `valid` masks off.
      VF sv[C][kOut], bv[C][kOut];
      const DType t = c.w->scale_dtype;
      for (int j = 0; j < C; ++j) {
        const uint8_t* v = g.values + j * g.value_col;
        load_group_values(t, v, 0, valid, kChunk, sv[j]);
        load_group_values(t, v + g.bias, 0, valid, kChunk, bv[j]);
      }
      add_chunk_values<Bits, R, C>(c, m, g0, isum, sv, bv, acc);
    } else {
      add_chunk<Bits, R, C>(c, m, n, g0, valid, isum, acc);
    }
  }
  store_tile<R, C>(acc, y, ldy);
}

template <int Bits, int W>
void grp_cols(const Call& c, int64_t n0, int64_t n1, float* y) {
  const int64_t M = c.a->M, N = c.w->rows;
  const int64_t chunks = c.a->blocks_padded / kChunk, stride = chunks * W * kLanes;
  constexpr int64_t kColBlock = 64;  // the block's transposed codes stay in L2 for every row tile
  thread_local std::vector<uint32_t> scratch;
  scratch.resize(static_cast<size_t>(kColBlock * stride));
  const TransposeNet<W> net;
  for (int64_t nb = n0; nb < n1; nb += kColBlock) {
    const int64_t ne = std::min(n1, nb + kColBlock);
    transpose_groups<W>(net, *c.w, nb, ne - nb, chunks, scratch.data());
    tiles<kGrpRows, kGrpCols>(0, M, nb, ne, [&]<int TR, int TC>(int64_t m, int64_t n) {
      const GrpCodes src{reinterpret_cast<const uint8_t*>(scratch.data() + (n - nb) * stride),
                         stride * 4};
      tile_grp<Bits, W, TR, TC>(c, src, m, n, y + m * N + n, N);
    });
  }
}

// The group-interleaved tiles on a weight's panels (quant_panels.h): no transpose per call, and
// one stream per panel of kPanelRows rows with their scales. Tiles never cross a panel
// (kGrpCols divides kPanelRows; columns before the first multiple of kGrpCols go one by one).
template <int Bits, int W>
void panel_cols(const Call& c, int64_t n0, int64_t n1, float* y) {
  static_assert(kPanelRows % kGrpCols == 0, "a tile's columns lie in one panel");
  const int64_t M = c.a->M, N = c.w->rows;
  const PanelShape s = panel_shape(*c.w);
  const auto* base = static_cast<const uint8_t*>(c.w->panels);
  const auto tile = [&]<int TR, int TC>(int64_t m, int64_t n) {
    const GrpCodes src{base + n / kPanelRows * s.panel_bytes(), 0, &s, n % kPanelRows};
    tile_grp<Bits, W, TR, TC>(c, src, m, n, y + m * N + n, N);
  };
  const int64_t na = std::min(n1, (n0 + kGrpCols - 1) / kGrpCols * kGrpCols);
  if (n0 < na) tiles<kGrpRows, 1>(0, M, n0, na, tile);
  constexpr int64_t kColBlock = 64;  // the block's panels stay in L2 for every row tile
  for (int64_t nb = na; nb < n1; nb += kColBlock)
    tiles<kGrpRows, kGrpCols>(0, M, nb, std::min(n1, nb + kColBlock), tile);
}

template <int Bits, int LPG, int UPL>
void int8_cols(const Call& c, int64_t n0, int64_t n1, float* y) {
  const int64_t M = c.a->M;
  if (c.w->panels && !c.a->qgrp.empty() && c.a->grp_bits == Bits) {
    switch (c.w->group_size * Bits / 32) {  // code words per group
      case 4: return panel_cols<Bits, 4>(c, n0, n1, y);
      case 8: return panel_cols<Bits, 8>(c, n0, n1, y);
      case 16: return panel_cols<Bits, 16>(c, n0, n1, y);
      default: break;
    }
  }
  // qgrp: made for calls of interleaved_min_rows() rows or more, in one code width's order.
  if (!c.a->qgrp.empty() && c.a->grp_bits == Bits) {
    switch (c.w->group_size * Bits / 32) {  // code words per group
      case 4: return grp_cols<Bits, 4>(c, n0, n1, y);
      case 8: return grp_cols<Bits, 8>(c, n0, n1, y);
      case 16: return grp_cols<Bits, 16>(c, n0, n1, y);
      default: break;
    }
  }
  if (M == 1) {
    // The first tile has no tile before it to have asked for the start of its rows.
    const uint8_t* w = static_cast<const uint8_t*>(c.w->data);
    const int64_t first = std::min(c.ahead, c.row_bytes);
    const int rows = gemv_tile_rows_up_to(kGemvCols);
    for (int64_t n = n0; n < std::min<int64_t>(n1, n0 + rows); ++n)
      for (int64_t b = 0; b < first; b += 64) __builtin_prefetch(w + n * c.row_bytes + b, 0, 0);
    switch (rows) {
      case 1: return rows_block<Bits, LPG, UPL, 1, 1>(c, 0, 1, n0, n1, y);
      case 2: return rows_block<Bits, LPG, UPL, 1, 2>(c, 0, 1, n0, n1, y);
      default: return rows_block<Bits, LPG, UPL, 1, kGemvCols>(c, 0, 1, n0, n1, y);
    }
  }
  constexpr int64_t kColBlock = 64;  // the block's codes stay in L2 while every row tile passes
  for (int64_t nb = n0; nb < n1; nb += kColBlock)
    rows_block<Bits, LPG, UPL, kRows, kCols>(c, 0, M, nb, std::min(n1, nb + kColBlock), y);
}

// The tree's shape for group size G: lanes per group in one unit's vector (LPG) and units per
// leaf (UPL, > 1 once a group spans several units). False for group sizes it does not cover.
template <int Bits>
bool int8_cols(const Call& c, int64_t n0, int64_t n1, float* y) {
  // Group sizes 32, 64 and 128 (what quantize and MLX write), and 256 at 4 bits / 16 at 8 bits;
  // each case is a family of unrolled kernels per target, so rarer sizes take the reference.
  switch (c.w->group_size / kPerLane<Bits>) {  // lanes a group fills
    case 4:
      return int8_cols<Bits, 4, 1>(c, n0, n1, y), true;
    case 8:
      return int8_cols<Bits, 8, 1>(c, n0, n1, y), true;
    case 16:
      return int8_cols<Bits, std::min(kN, 16), 16 / std::min(kN, 16)>(c, n0, n1, y), true;
    case 32:
      return int8_cols<Bits, kN, 32 / kN>(c, n0, n1, y), true;
    default:
      return false;
  }
}
#endif  // LOCKSTEP_INT8_SIMD

void Int8LinearCols(const Int8Acts& a, const Weight& w, int64_t n0, int64_t n1, float* y) {
#if LOCKSTEP_INT8_SIMD
  const int64_t K = w.cols, G = w.group_size;
  const bool pow2 = G >= 16 && (G & (G - 1)) == 0;
  const int64_t unit = (w.bits == 4 ? 8 : 4) * int64_t{kN};
  const bool shape = w.bits == 4 ? K % kNibbleBlock == 0 && !a.qnib.empty() : K % unit == 0;
  if (pow2 && shape && a.block == G) {
    // On panels a one-row call reads one stream per tile: `ahead` is the whole distance
    // (panel_prefetch_bytes()), and `prefetch` picks the locality.
    const int64_t ahead = w.panels ? panel_prefetch_bytes() : gemv_prefetch_bytes();
    const bool gemv = a.M == 1 && ahead > 0;
    const bool nta = gemv_prefetch_locality() == 0;
    const Call c{&a, &w, K / G, K * w.bits / 8, gemv && !nta,
                 !gemv      ? 0
                 : w.panels ? ahead
                 : nta      ? ahead / gemv_tile_rows_up_to(kGemvCols)
                            : 0};
    if (w.bits == 4 ? int8_cols<4>(c, n0, n1, y) : int8_cols<8>(c, n0, n1, y)) return;
  }
#endif
  ref::int8_linear_cols(a, w, n0, n1, y);
}

}  // namespace lockstep::kernels::HWY_NAMESPACE
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_CLANG
#pragma clang attribute pop
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/cpu/linear_quant_int8.h"

namespace lockstep::kernels {
HWY_EXPORT(Int8LinearCols);

void int8_linear_cols(const Int8Acts& a, const Weight& w, int64_t n0, int64_t n1, float* y) {
  HWY_DYNAMIC_DISPATCH(Int8LinearCols)(a, w, n0, n1, y);
}

}  // namespace lockstep::kernels
#endif
