// RMSNorm (ops.h), the gated RMSNorm and the L2 normalisation of Gated DeltaNet (gated_delta.h),
// per Highway target. Per row: the sum of squares by the dot schedule (vm::dot16 = ref::dot), the
// scalar factor exactly as the scalar form computes it, then per element the same multiplications
// in the same order (and vm::exp for SiLU), so every target gives the scalar form's bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/norm.cpp"
#include <cmath>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/fma_targets.h"
#include "kernels/cpu/vec_math-inl.h"
#include "kernels/math.h"
#include "kernels/ref/ref_ops.h"

HWY_BEFORE_NAMESPACE();
namespace lockstep::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if !LOCKSTEP_HWY_NO_FMA
using DF = vm::ScheduleTag;  // kN lanes at compile time and at run time
constexpr size_t kN = hn::MaxLanes(DF());
constexpr int kG = kLanes / static_cast<int>(kN);
HWY_INLINE float sum_sq(const float* x, int64_t D) { return vm::dot16<kG>(DF(), x, x, D); }
#else
HWY_INLINE float sum_sq(const float* x, int64_t D) { return ref::dot(x, x, D); }
#endif

// mode 0: (x * r) * w; mode 1: (x * r) * (1 + w)
void RmsNormRows(const float* x, int64_t M, int64_t D, const float* w, float eps, int mode,
                 float* y) {
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * D;
    float* yr = y + m * D;
    const float r = 1.0f / std::sqrt(sum_sq(xr, D) / static_cast<float>(D) + eps);
    int64_t d = 0;
#if !LOCKSTEP_HWY_NO_FMA
    const DF df;
    const auto vr = hn::Set(df, r), one = hn::Set(df, 1.0f);
    for (; d + static_cast<int64_t>(kN) <= D; d += kN) {
      const auto wv = hn::LoadU(df, w + d);
      const auto xs = hn::Mul(hn::LoadU(df, xr + d), vr);
      hn::StoreU(hn::Mul(xs, mode ? hn::Add(one, wv) : wv), df, yr + d);
    }
#endif
    for (; d < D; ++d) yr[d] = mode ? (xr[d] * r) * (1.0f + w[d]) : (xr[d] * r) * w[d];
  }
}

// y = ((x * inv) * w) * silu(z) per row, inv = 1 / sqrt(sum_sq / D + eps).
void GatedRmsNormRows(const float* x, const float* z, int64_t rows, int64_t D, const float* w,
                      float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * D;
    const float* zr = z + r * D;
    float* yr = y + r * D;
    const float inv = 1.0f / std::sqrt(sum_sq(xr, D) / static_cast<float>(D) + eps);
    int64_t d = 0;
#if !LOCKSTEP_HWY_NO_FMA
    const DF df;
    const auto vinv = hn::Set(df, inv), one = hn::Set(df, 1.0f);
    for (; d + static_cast<int64_t>(kN) <= D; d += kN) {
      const auto zv = hn::LoadU(df, zr + d);
      const auto silu = hn::Div(zv, hn::Add(one, vm::exp(df, hn::Neg(zv))));
      const auto a = hn::Mul(hn::Mul(hn::LoadU(df, xr + d), vinv), hn::LoadU(df, w + d));
      hn::StoreU(hn::Mul(a, silu), df, yr + d);
    }
#endif
    for (; d < D; ++d) yr[d] = ((xr[d] * inv) * w[d]) * silu_f32(zr[d]);
  }
}

// x *= 1 / sqrt(sum_sq + eps) per row.
void L2NormalizeRows(float* x, int64_t rows, int64_t D, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * D;
    const float inv = 1.0f / std::sqrt(sum_sq(xr, D) + eps);
    int64_t d = 0;
#if !LOCKSTEP_HWY_NO_FMA
    const DF df;
    const auto vinv = hn::Set(df, inv);
    for (; d + static_cast<int64_t>(kN) <= D; d += kN)
      hn::StoreU(hn::Mul(hn::LoadU(df, xr + d), vinv), df, xr + d);
#endif
    for (; d < D; ++d) xr[d] *= inv;
  }
}

}  // namespace lockstep::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/profile.h"
#include "kernels/gated_delta.h"
#include "kernels/ops.h"

namespace lockstep::kernels {
HWY_EXPORT(RmsNormRows);
HWY_EXPORT(GatedRmsNormRows);
HWY_EXPORT(L2NormalizeRows);

void rms_norm(const float* x, int64_t M, int64_t D, const float* w, float eps, bool zero_centered,
              float* y) {
  profile::Scope prof(profile::Op::RmsNorm);
  HWY_DYNAMIC_DISPATCH(RmsNormRows)(x, M, D, w, eps, zero_centered ? 1 : 0, y);
}

void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t D, const float* w,
                    float eps, float* y) {
  profile::Scope prof(profile::Op::RmsNorm);
  HWY_DYNAMIC_DISPATCH(GatedRmsNormRows)(x, z, rows, D, w, eps, y);
}

void l2_normalize(float* x, int64_t rows, int64_t D, float eps) {
  HWY_DYNAMIC_DISPATCH(L2NormalizeRows)(x, rows, D, eps);
}

}  // namespace lockstep::kernels
#endif
