// Per-target SIMD forms of the schedule's fold (schedule.h) and of exp_f32 (math.h), giving the
// scalar versions' bits lane by lane: the same operations on the same operands in the same order.
// Include inside HWY_NAMESPACE after hwy/highway.h (re-included once per target; no include guard
// by design, the Highway "-inl.h" convention). Only for targets with fused MulAdd: include
// kernels/cpu/fma_targets.h first; the others run the scalar oracles.
#include "hwy/highway.h"
#include "kernels/cpu/fma_targets.h"
#include "kernels/schedule.h"

#if !LOCKSTEP_HWY_NO_FMA
HWY_BEFORE_NAMESPACE();

namespace lockstep::kernels::HWY_NAMESPACE {
namespace vm {
namespace hn = hwy::HWY_NAMESPACE;

// The fixed tree lane[l] += lane[l + s] for s = half width .. 1, on one vector: each step adds
// the upper half onto the lower half, which is the scalar tree's step for every l at once. The
// lane count kNow of D is carried along rather than read from MaxLanes(Half<D>): on SVE, Highway
// 1.0.3's Half halves both the cap and the power of two, so MaxLanes of a half tag counts half
// the lanes it has (8, 2, 0) and never reaches 1. Lanes() at run time is right.
template <size_t kNow, class D, class V>
HWY_INLINE float fold_halves_n(D d, V v) {
  if constexpr (kNow == 1) {
    (void)d;
    return hn::GetLane(v);
  } else {
    const hn::Half<D> dh;
    return fold_halves_n<kNow / 2>(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
}
template <class D, class V>
HWY_INLINE float fold_halves(D d, V v) {
  return fold_halves_n<hn::MaxLanes(D())>(d, v);  // exact for the full tag (ScheduleTag)
}

// The float vectors of the schedule on this target: at most 16 lanes, and a lane count known at
// compile time (kN = MaxLanes, which the kernels' loops, tiles and folds are built on) that is
// also the count at run time. On fixed-width targets (x86, NEON, and SVE_256 and SVE2_128, which
// Highway compiles for one vector length) that is CappedTag<float, 16>. On scalable SVE (HWY_SVE,
// HWY_SVE2) MaxLanes is only an upper bound: at a 128-bit vector length CappedTag<float, 16> has
// MaxLanes 16 but 4 lanes at run time, and a loop stepping kN would skip three quarters of the
// elements. There the cap is 4 lanes (128 bits, the shortest SVE vector): exactly 4 at every
// vector length.
#if HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SVE_256 && HWY_TARGET != HWY_SVE2_128
using ScheduleTag = hn::CappedTag<float, 4>;
#else
using ScheduleTag = hn::CappedTag<float, kLanes>;
#endif
static_assert(hn::MaxLanes(ScheduleTag()) <= kLanes);

// fold_lanes() of 16 logical lanes held in kG vectors of 16 / kG lanes (lane l of the schedule is
// lane l % n of vector l / n), given as values (SVE vectors cannot be array elements; a1..a3 are
// unused when kG is smaller). The first steps (s = 8 for two vectors; s = 8, 4 for four) add
// whole vectors, in lane order.
template <int kG, class D, class V>
HWY_INLINE float fold16(D d, V a0, V a1, V a2, V a3) {
  static_assert(kG == 1 || kG == 2 || kG == 4, "16 lanes in 1, 2 or 4 vectors");
  if constexpr (kG == 1) {
    return fold_halves(d, a0);
  } else if constexpr (kG == 2) {
    return fold_halves(d, hn::Add(a0, a1));
  } else {
    return fold_halves(d, hn::Add(hn::Add(a0, a2), hn::Add(a1, a3)));
  }
}

// The same from an array of kG vectors (targets with sized vectors only).
template <int kG, class D, class V>
HWY_INLINE float fold16(D d, const V* acc) {
  if constexpr (kG == 1) {
    return fold16<1>(d, acc[0], acc[0], acc[0], acc[0]);
  } else if constexpr (kG == 2) {
    return fold16<2>(d, acc[0], acc[1], acc[0], acc[0]);
  } else {
    return fold16<4>(d, acc[0], acc[1], acc[2], acc[3]);
  }
}

// ref::dot's schedule on float vectors: lane = k mod 16 (16 lanes in kG vectors of D), FMAs in
// increasing k, zero padding to a multiple of 16, then fold16.
template <int kG, class D>
HWY_INLINE float dot16(D d, const float* a, const float* b, int64_t K) {
  constexpr size_t kN = hn::MaxLanes(D());
  static_assert(kN * kG == kLanes, "kG vectors of D make the 16 lanes");
  // Named accumulators, not an array, so that SVE compiles it; only the first kG are used.
  auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  const int64_t full = K / kLanes * kLanes;
  for (int64_t k = 0; k < full; k += kLanes) {
    a0 = hn::MulAdd(hn::LoadU(d, a + k), hn::LoadU(d, b + k), a0);
    if constexpr (kG >= 2) a1 = hn::MulAdd(hn::LoadU(d, a + k + kN), hn::LoadU(d, b + k + kN), a1);
    if constexpr (kG == 4) {
      a2 = hn::MulAdd(hn::LoadU(d, a + k + 2 * kN), hn::LoadU(d, b + k + 2 * kN), a2);
      a3 = hn::MulAdd(hn::LoadU(d, a + k + 3 * kN), hn::LoadU(d, b + k + 3 * kN), a3);
    }
  }
  if (full < K) {
    HWY_ALIGN float ap[kLanes] = {}, bp[kLanes] = {};
    for (int64_t i = 0; i < K - full; ++i) {
      ap[i] = a[full + i];
      bp[i] = b[full + i];
    }
    a0 = hn::MulAdd(hn::Load(d, ap), hn::Load(d, bp), a0);
    if constexpr (kG >= 2) a1 = hn::MulAdd(hn::Load(d, ap + kN), hn::Load(d, bp + kN), a1);
    if constexpr (kG == 4) {
      a2 = hn::MulAdd(hn::Load(d, ap + 2 * kN), hn::Load(d, bp + 2 * kN), a2);
      a3 = hn::MulAdd(hn::Load(d, ap + 3 * kN), hn::Load(d, bp + 3 * kN), a3);
    }
  }
  return fold16<kG>(d, a0, a1, a2, a3);
}

// exp_f32 of every lane (math.h: range reduction with a two-part ln2, degree-7 Horner polynomial,
// scaling by 2^n in two factors), with its special cases as lane selects.
template <class D, class V>
HWY_INLINE V exp(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504088896341f)));  // nearest, ties even
  V r = hn::MulAdd(n, hn::Set(d, -0.693145751953125f), x);
  r = hn::MulAdd(n, hn::Set(d, -1.428606765330187045e-06f), r);
  V p = hn::Set(d, 1.0f / 5040.0f);
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 720.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 120.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 24.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 6.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.5f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  // e1 = e / 2 truncated toward zero (C division), e2 = e - e1; lanes outside the range are
  // replaced below, whatever their integer conversion gave.
  const hn::RebindToUnsigned<D> du;
  const auto e = hn::ConvertTo(di, n);
  const auto negative = hn::BitCast(di, hn::ShiftRight<31>(hn::BitCast(du, e)));
  const auto e1 = hn::ShiftRight<1>(hn::Add(e, negative));
  const auto e2 = hn::Sub(e, e1);
  const auto bias = hn::Set(di, 127);
  const V s1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(e1, bias)));
  const V s2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(e2, bias)));
  V y = hn::Mul(hn::Mul(p, s1), s2);
  y = hn::IfThenElse(hn::Lt(x, hn::Set(d, -103.97208f)), hn::Zero(d), y);
  y = hn::IfThenElse(hn::Gt(x, hn::Set(d, 88.72283935546875f)), hn::Inf(d), y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

}  // namespace vm
}  // namespace lockstep::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // !LOCKSTEP_HWY_NO_FMA
