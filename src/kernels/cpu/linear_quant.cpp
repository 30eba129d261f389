// linear() for quantized weights (kernels/quant_format.h), compiled for every Highway target and
// dispatched at run time. This file is the `float` quant-dot mode and the mode switch; the `int8`
// mode's kernel is linear_quant_int8.cpp.
//
// Each weight element is dequantized to exactly the float32 the format defines, fma(q, s, b), and
// fed to the dot schedule of schedule.h (16 logical lanes, lane = k mod 16, FMAs in increasing k,
// fixed folding tree; K is a multiple of the group size, itself a multiple of 16, so there is no
// padding). The result is therefore ref::quant_linear_cols bit for bit, for any row count,
// thread count and target. Tiles only decide which dot products share loads and dequantization.
//
// 4-bit codes are unpacked in the order cheapest for SIMD: in each 16-element block the low
// nibbles (even elements) fill physical lanes 0..7 and the high nibbles (odd elements) lanes
// 8..15. x is permuted the same way once per call, so every lane still pairs x[k] with w[k] and
// accumulates the elements of one logical lane in increasing k; the lane sums are put back in
// logical order before the fold.
//
// On 16-lane targets a 4-bit element is not rebuilt per weight: per (row, group) the 16 values
// the format can produce, lut[q] = fma(float(q), s, b) (the same fma, same operands), are computed
// once in one register and each block's codes index it (one permute instead of convert + fma).
// Every element is the same float as before, so the bits do not change. On 8-lane targets the
// 16 values span two registers and a two-table lookup (two permutes and a select) is no cheaper
// than convert + fma (not measured): they keep the per-weight dequantization, as does 8-bit.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/linear_quant.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/cpu_tuning.h"
#include "kernels/cpu/fma_targets.h"
#include "kernels/cpu/vec_math-inl.h"
#include "kernels/ops.h"
#include "kernels/quant_format.h"
#include "kernels/ref/quant_ref.h"
#include "kernels/schedule.h"

#ifndef LOCKSTEP_LINEAR_QUANT_PERM
#define LOCKSTEP_LINEAR_QUANT_PERM
namespace lockstep::kernels {
// Logical lane (element of the 16-block) held by physical lane j for 4-bit codes.
constexpr int nibble_lane(int j) { return j < 8 ? 2 * j : 2 * (j - 8) + 1; }
}  // namespace lockstep::kernels
#endif

#if LOCKSTEP_HWY_SVE  // runs the NEON pass's kernel (fma_targets.h says why)
namespace lockstep::kernels::N_NEON {
void QuantLinearCols(const float* x, const float* xperm, int64_t M, const Weight& w, int64_t n0,
                     int64_t n1, float* y);
}
#endif

HWY_BEFORE_NAMESPACE();
namespace lockstep::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if !LOCKSTEP_HWY_NO_FMA && !LOCKSTEP_HWY_SVE
using DF = hn::CappedTag<float, kLanes>;
using VF = decltype(hn::Zero(DF()));
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
constexpr size_t kN = hn::MaxLanes(DF());
constexpr int kG = kLanes / static_cast<int>(kN);  // vectors per 16-lane block
static_assert(kN == 4 || kN == 8 || kN == 16, "16 lanes in 1, 2 or 4 vectors");

template <class V>
HWY_INLINE VF to_float(V codes) {  // codes < 256: exact
  return hn::ConvertTo(DF(), hn::BitCast(DI(), codes));
}

// The 16 codes of the block at p (16 bytes for 8-bit, 8 bytes for 4-bit) as floats, in physical
// lane order (identity for 8-bit, nibble_lane for 4-bit).
template <int Bits>
HWY_INLINE void load_codes(const uint8_t* p, VF* q) {
  if constexpr (Bits == 8) {
    const hn::Rebind<uint8_t, DF> d8;
    for (int g = 0; g < kG; ++g) q[g] = to_float(hn::PromoteTo(DU(), hn::LoadU(d8, p + g * kN)));
  } else if constexpr (kN == 16) {
    const hn::Half<DU> dh;
    const hn::Rebind<uint8_t, decltype(dh)> d8;
    const auto b = hn::PromoteTo(dh, hn::LoadU(d8, p));
    q[0] = to_float(hn::Combine(DU(), hn::ShiftRight<4>(b), hn::And(b, hn::Set(dh, 15u))));
  } else {
    // kN == 8: one 8-byte load, low nibbles then high; kN == 4: two 4-byte loads.
    const hn::Rebind<uint8_t, DF> d8;
    constexpr int kLoads = kG / 2;
    for (int i = 0; i < kLoads; ++i) {
      const auto b = hn::PromoteTo(DU(), hn::LoadU(d8, p + i * kN));
      q[i] = to_float(hn::And(b, hn::Set(DU(), 15u)));
      q[kLoads + i] = to_float(hn::ShiftRight<4>(b));
    }
  }
}

// 4-bit lookup-table path (16-lane targets): the 16 codes of the 8-byte block at p as lane
// indices, in nibble_lane order (lanes 0..7 the low nibbles of bytes 0..7, lanes 8..15 the high).
constexpr bool kNibbleLut = kN == 16;
template <class D>  // D = DF, 16 lanes (unused elsewhere)
HWY_INLINE auto nibble_indices(D d, const uint8_t* p) {
  const hn::RebindToSigned<D> di;
  if constexpr (hn::MaxLanes(D()) != 16) {
    (void)p;
    return hn::IndicesFromVec(d, hn::Zero(di));
  } else {
    const hn::RebindToUnsigned<D> du;
    const hn::Full128<uint64_t> d64;
    const hn::Rebind<uint8_t, decltype(du)> d8;
    uint64_t bytes;
    __builtin_memcpy(&bytes, p, 8);
    // Bytes 0..7 twice; lanes 8..15 then shift their copy right by 4.
    const auto b = hn::PromoteTo(du, hn::BitCast(d8, hn::Set(d64, bytes)));
    const auto shift = hn::ShiftLeft<2>(hn::ShiftRight<3>(hn::Iota(du, 0u)));  // 0 x8, 4 x8
    const auto codes = hn::And(hn::Shr(b, shift), hn::Set(du, 15u));
    return hn::IndicesFromVec(d, hn::BitCast(di, codes));
  }
}

// Scale/bias loaders per stored dtype, chosen once per call (a per-group switch costs as much as
// the group's arithmetic in a one-row call).
struct ScalesBF16 {
  static float at(const void* p, int64_t i) {
    return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
  }
};
struct ScalesF16 {
  static float at(const void* p, int64_t i) {
    return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
  }
};
struct ScalesF32 {
  static float at(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
};

// y for a tile of R rows x C columns (weight rows n .. n+C-1). x rows are K floats apart.
template <int R, int C, int Bits, class S>
HWY_INLINE void tile(const float* x, const Weight& w, int64_t n, float* y, int64_t ldy) {
  const DF df;
  const int64_t K = w.cols, G = w.group_size, groups = K / G;
  const int64_t row_bytes = K * Bits / 8;
  const uint8_t* base = static_cast<const uint8_t*>(w.data) + n * row_bytes;
  VF acc[R][C][kG];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      for (int g = 0; g < kG; ++g) acc[r][c][g] = hn::Zero(df);
  for (int64_t gi = 0; gi < groups; ++gi) {
    VF sv[C], bv[C];
    for (int c = 0; c < C; ++c) {
      const int64_t at = (n + c) * groups + gi;
      sv[c] = hn::Set(df, S::at(w.scales, at));
      bv[c] = hn::Set(df, S::at(w.biases, at));
    }
    if constexpr (Bits == 4 && kNibbleLut) {
      VF lut[C];  // lut[c][q] = the format's element for code q, exactly
      for (int c = 0; c < C; ++c) lut[c] = hn::MulAdd(hn::Iota(df, 0.0f), sv[c], bv[c]);
      for (int64_t k = gi * G; k < (gi + 1) * G; k += kLanes) {
        if (R == 1 && k % 64 == 0)
          for (int c = 0; c < C; ++c)
            __builtin_prefetch(base + (C + c) * row_bytes + k / 2, 0, 0);
        VF xv[R];
        for (int r = 0; r < R; ++r) xv[r] = hn::LoadU(df, x + r * K + k);
        for (int c = 0; c < C; ++c) {
          const uint8_t* codes = base + c * row_bytes + k / 2;
          const VF wv = hn::TableLookupLanes(lut[c], nibble_indices(df, codes));
          for (int r = 0; r < R; ++r) acc[r][c][0] = hn::MulAdd(xv[r], wv, acc[r][c][0]);
        }
      }
      continue;
    }
    for (int64_t k = gi * G; k < (gi + 1) * G; k += kLanes) {
      if (R == 1 && k % 64 == 0)  // stream the next tile's rows (one line per row) a tile ahead
        for (int c = 0; c < C; ++c)
          __builtin_prefetch(base + (C + c) * row_bytes + k * Bits / 8, 0, 0);
      VF q[C][kG];
      for (int c = 0; c < C; ++c) load_codes<Bits>(base + c * row_bytes + k * Bits / 8, q[c]);
      for (int g = 0; g < kG; ++g) {
        VF xv[R];
        for (int r = 0; r < R; ++r) xv[r] = hn::LoadU(df, x + r * K + k + g * kN);
        for (int c = 0; c < C; ++c) {
          const VF wv = hn::MulAdd(q[c][g], sv[c], bv[c]);  // the format's element, exactly
          for (int r = 0; r < R; ++r) acc[r][c][g] = hn::MulAdd(xv[r], wv, acc[r][c][g]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      if constexpr (Bits == 8) {
        y[r * ldy + c] = vm::fold16<kG>(df, acc[r][c]);
      } else {
        HWY_ALIGN float phys[kLanes];
        float lanes[kLanes];
        for (int g = 0; g < kG; ++g) hn::Store(acc[r][c][g], df, phys + g * kN);
        for (int j = 0; j < kLanes; ++j) lanes[nibble_lane(j)] = phys[j];
        y[r * ldy + c] = fold_lanes(lanes);
      }
    }
}

// Tile shapes: enough accumulators to hide FMA latency, few enough that the per-column scale and
// bias vectors stay in registers. They never change any element's arithmetic.
constexpr int kRows = 4;
constexpr int kCols = kN >= 16 ? 2 : 1;
constexpr int kGemvCols = kN >= 16 ? 4 : 2;  // measured: wider spills the scale registers

template <int R, int C, int Bits, class S>
void rows_block(const float* x, int64_t M, const Weight& w, int64_t n0, int64_t n1, float* y) {
  const int64_t K = w.cols, N = w.rows;
  int64_t m = 0;
  for (; m + R <= M; m += R) {
    int64_t n = n0;
    for (; n + C <= n1; n += C) tile<R, C, Bits, S>(x + m * K, w, n, y + m * N + n, N);
    for (; n < n1; ++n) tile<R, 1, Bits, S>(x + m * K, w, n, y + m * N + n, N);
  }
  for (; m < M; ++m) {
    int64_t n = n0;
    for (; n + C <= n1; n += C) tile<1, C, Bits, S>(x + m * K, w, n, y + m * N + n, N);
    for (; n < n1; ++n) tile<1, 1, Bits, S>(x + m * K, w, n, y + m * N + n, N);
  }
}

template <int Bits, class S>
void quant_cols(const float* x, int64_t M, const Weight& w, int64_t n0, int64_t n1, float* y) {
  if (M == 1) {  // cpu_tuning.h: how many weight rows a one-row tile reads
    switch (gemv_tile_rows_up_to(kGemvCols)) {
      case 1: return rows_block<1, 1, Bits, S>(x, M, w, n0, n1, y);
      case 2: return rows_block<1, 2, Bits, S>(x, M, w, n0, n1, y);
      default: return rows_block<1, kGemvCols, Bits, S>(x, M, w, n0, n1, y);
    }
  }
  constexpr int64_t kColBlock = 64;  // weights of a column block stay in L2 across row tiles
  for (int64_t nb = n0; nb < n1; nb += kColBlock)
    rows_block<kRows, kCols, Bits, S>(x, M, w, nb, std::min(n1, nb + kColBlock), y);
}

template <int Bits>
void quant_cols(const float* x, int64_t M, const Weight& w, int64_t n0, int64_t n1, float* y) {
  switch (w.scale_dtype) {
    case DType::BF16:
      return quant_cols<Bits, ScalesBF16>(x, M, w, n0, n1, y);
    case DType::F16:
      return quant_cols<Bits, ScalesF16>(x, M, w, n0, n1, y);
    default:
      return quant_cols<Bits, ScalesF32>(x, M, w, n0, n1, y);
  }
}
#endif  // !LOCKSTEP_HWY_NO_FMA && !LOCKSTEP_HWY_SVE

// x: the activations; xperm: the same with each 16-block in nibble_lane order (4-bit only).
void QuantLinearCols(const float* x, const float* xperm, int64_t M, const Weight& w, int64_t n0,
                     int64_t n1, float* y) {
#if LOCKSTEP_HWY_NO_FMA
  (void)xperm;
  ref::quant_linear_cols(x, M, w, n0, n1, y);
#elif LOCKSTEP_HWY_SVE
  N_NEON::QuantLinearCols(x, xperm, M, w, n0, n1, y);
#else
  if (w.bits == 8) return quant_cols<8>(x, M, w, n0, n1, y);
  (void)x;
  quant_cols<4>(xperm, M, w, n0, n1, y);
#endif
}

}  // namespace lockstep::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <atomic>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/profile.h"
#include "kernels/cpu/act_quant.h"
#include "kernels/cpu/linear_quant.h"
#include "kernels/cpu/linear_quant_int8.h"

namespace lockstep::kernels {
HWY_EXPORT(QuantLinearCols);

namespace {
std::atomic<QuantDot> g_quant_dot{kDefaultQuantDot};

void quant_permute_x(const float* x, int64_t M, int64_t K, std::vector<float>& xperm) {
  xperm.resize(static_cast<size_t>(M * K));
  for (int64_t i = 0; i < M * K; i += kLanes)
    for (int j = 0; j < kLanes; ++j) xperm[i + j] = x[i + nibble_lane(j)];
}
}  // namespace

void set_quant_dot(QuantDot mode) { g_quant_dot = mode; }
QuantDot quant_dot() { return g_quant_dot; }
const char* quant_dot_name(QuantDot mode) { return mode == QuantDot::Int8 ? "int8" : "float"; }
QuantDot parse_quant_dot(const char* name) {
  if (std::strcmp(name, "float") == 0) return QuantDot::Float;
  if (std::strcmp(name, "int8") == 0) return QuantDot::Int8;
  fail("quant dot '", name, "': expected float or int8");
}

void prepare_quant_input(const float* x, int64_t M, int64_t K, bool any4bit, int64_t group,
                         bool panels, QuantInput& in) {
  in.mode = g_quant_dot;
  if (in.mode == QuantDot::Int8) {
    quantize_acts(x, M, K, group, in.acts);
    // The group-interleaved order for one code width: 4-bit where any weight is (a mixed call's
    // 8-bit weights then take the lane trees), else 8-bit.
    in.acts.qgrp.clear();
    in.acts.grp_bits = 0;
    const int64_t min_rows = interleaved_min_rows();
    const int bits = any4bit ? 4 : 8;
    // Panels hold the codes in that order already: their kernels take it at every M.
    if ((panels || (min_rows > 0 && M >= min_rows)) && interleaved_groups(bits, group) &&
        (bits == 8 || !in.acts.qnib.empty()))
      interleave_groups(in.acts, bits);
  } else if (any4bit) {
    quant_permute_x(x, M, K, in.xperm);
  }
}

void quant_linear_cols(const float* x, const QuantInput& in, int64_t M, const Weight& w,
                       int64_t n0, int64_t n1, float* y) {
  if (in.mode == QuantDot::Int8) {
    LOCKSTEP_CHECK(in.acts.block == w.group_size && in.acts.M == M && in.acts.K == w.cols);
    return int8_linear_cols(in.acts, w, n0, n1, y);
  }
  HWY_DYNAMIC_DISPATCH(QuantLinearCols)(x, in.xperm.data(), M, w, n0, n1, y);
}

void linear_quant(const float* x, int64_t M, const Weight& w, const float* bias, float* y,
                  ThreadPool& pool) {
  const int64_t N = w.rows, K = w.cols;
  profile::Scope prof(profile::Op::Linear, w.bytes());
  check_quant_layout(w, "linear");
  thread_local QuantInput mine;  // reused across calls; the workers read it through `in`
  QuantInput& in = mine;
  prepare_quant_input(x, M, K, w.bits == 4, w.group_size, w.panels != nullptr, in);
  pool.parallel_for(
      N,
      [&](int64_t n0, int64_t n1) {
        quant_linear_cols(x, in, M, w, n0, n1, y);
        if (bias)
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = n0; n < n1; ++n) y[m * N + n] += bias[n];
      },
      16);
}

}  // namespace lockstep::kernels
#endif
