// silu_mul and gelu_tanh_mul (ops.h) per Highway target: out = silu(gate) * up with silu(x) = x / (1 + exp_f32(-x)),
// lane by lane the same operations as the scalar form (vm::exp is exp_f32 per lane; division and
// multiplication are correctly rounded everywhere), so every target gives the same bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/activation.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/fma_targets.h"
#include "kernels/cpu/vec_math-inl.h"
#include "kernels/math.h"

HWY_BEFORE_NAMESPACE();
namespace lockstep::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
#if !LOCKSTEP_HWY_NO_FMA
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const auto one = hn::Set(d, 1.0f);
  for (; i + L <= n; i += L) {
    const auto x = hn::LoadU(d, gate + i);
    const auto s = hn::Div(x, hn::Add(one, vm::exp(d, hn::Neg(x))));
    hn::StoreU(hn::Mul(s, hn::LoadU(d, up + i)), d, out + i);
  }
#endif
  for (; i < n; ++i) out[i] = silu_f32(gate[i]) * up[i];
}

// gelu_tanh_f32 lane by lane: z = x * fma(c2, x * x, c1), x / (1 + exp(-z)), times up.
void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
#if !LOCKSTEP_HWY_NO_FMA
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const auto one = hn::Set(d, 1.0f), c1 = hn::Set(d, kGeluC1), c2 = hn::Set(d, kGeluC2);
  for (; i + L <= n; i += L) {
    const auto x = hn::LoadU(d, gate + i);
    const auto z = hn::Mul(x, hn::MulAdd(c2, hn::Mul(x, x), c1));
    const auto g = hn::Div(x, hn::Add(one, vm::exp(d, hn::Neg(z))));
    hn::StoreU(hn::Mul(g, hn::LoadU(d, up + i)), d, out + i);
  }
#endif
  for (; i < n; ++i) out[i] = gelu_tanh_f32(gate[i]) * up[i];
}

}  // namespace lockstep::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/profile.h"
#include "kernels/ops.h"

namespace lockstep::kernels {
HWY_EXPORT(SiluMul);
HWY_EXPORT(GeluTanhMul);

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  profile::Scope prof(profile::Op::SiluMul);
  HWY_DYNAMIC_DISPATCH(SiluMul)(gate, up, out, n);
}

void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  profile::Scope prof(profile::Op::SiluMul);  // the MLP's activation, whichever it is
  HWY_DYNAMIC_DISPATCH(GeluTanhMul)(gate, up, out, n);
}

}  // namespace lockstep::kernels
#endif
