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
// the upper half onto the lower half, which is the scalar tree's step for every l at once.
template <class D, class V>
HWY_INLINE float fold_halves(D d, V v) {
  if constexpr (hn::MaxLanes(D()) == 1) {
    (void)d;
    return hn::GetLane(v);
  } else {
    const hn::Half<D> dh;
    return fold_halves(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
}

// fold_lanes() of 16 logical lanes held in kG vectors of 16 / kG lanes (lane l of the schedule is
// lane l % n of vector l / n). The first steps (s = 8 for two vectors; s = 8, 4 for four) add
// whole vectors, in lane order.
template <int kG, class D, class V>
HWY_INLINE float fold16(D d, const V* acc) {
  static_assert(kG == 1 || kG == 2 || kG == 4, "16 lanes in 1, 2 or 4 vectors");
  if constexpr (kG == 1) {
    return fold_halves(d, acc[0]);
  } else if constexpr (kG == 2) {
    return fold_halves(d, hn::Add(acc[0], acc[1]));
  } else {
    return fold_halves(d, hn::Add(hn::Add(acc[0], acc[2]), hn::Add(acc[1], acc[3])));
  }
}

// ref::dot's schedule on float vectors: lane = k mod 16 (16 lanes in kG vectors of D), FMAs in
// increasing k, zero padding to a multiple of 16, then fold16.
template <int kG, class D>
HWY_INLINE float dot16(D d, const float* a, const float* b, int64_t K) {
  constexpr size_t kN = hn::MaxLanes(D());
  static_assert(kN * kG == kLanes, "kG vectors of D make the 16 lanes");
  using V = decltype(hn::Zero(d));
  V acc[kG];
  for (int g = 0; g < kG; ++g) acc[g] = hn::Zero(d);
  const int64_t full = K / kLanes * kLanes;
  for (int64_t k = 0; k < full; k += kLanes)
    for (int g = 0; g < kG; ++g)
      acc[g] = hn::MulAdd(hn::LoadU(d, a + k + g * kN), hn::LoadU(d, b + k + g * kN), acc[g]);
  if (full < K) {
    HWY_ALIGN float ap[kLanes] = {}, bp[kLanes] = {};
    for (int64_t i = 0; i < K - full; ++i) {
      ap[i] = a[full + i];
      bp[i] = b[full + i];
    }
    for (int g = 0; g < kG; ++g)
      acc[g] = hn::MulAdd(hn::Load(d, ap + g * kN), hn::Load(d, bp + g * kN), acc[g]);
  }
  return fold16<kG>(d, acc);
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
