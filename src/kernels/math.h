// Transcendental functions with one implementation for every CPU target: polynomials evaluated
// with explicit FMAs (the build forbids contraction), so results never depend on libm, on the
// instruction set, or on the shape of a call. Accuracy is about 1-2 ulp over the useful range,
// far inside the tolerances against float64 references.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace lockstep::kernels {

inline float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// e^x. Range reduction x = n ln2 + r with a two-constant ln2, |r| <= ln2/2, degree-7 Taylor
// polynomial in Horner form, then scaling by 2^n in two steps so subnormal results stay right.
inline float exp_f32(float x) {
  if (std::isnan(x)) return x;
  if (x > 88.72283935546875f) return std::numeric_limits<float>::infinity();
  if (x < -103.97208f) return 0.0f;
  const float n = std::nearbyint(x * 1.44269504088896341f);
  float r = std::fma(n, -0.693145751953125f, x);  // ln2 high part (exact product)
  r = std::fma(n, -1.428606765330187045e-06f, r);  // ln2 low part
  float p = 1.0f / 5040.0f;
  p = std::fma(p, r, 1.0f / 720.0f);
  p = std::fma(p, r, 1.0f / 120.0f);
  p = std::fma(p, r, 1.0f / 24.0f);
  p = std::fma(p, r, 1.0f / 6.0f);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  const int32_t e = static_cast<int32_t>(n);
  const int32_t e1 = e / 2, e2 = e - e1;  // split so each factor is a normal float
  return p * bits_to_float(static_cast<uint32_t>(e1 + 127) << 23) *
         bits_to_float(static_cast<uint32_t>(e2 + 127) << 23);
}

// Natural log for x > 0 (NaN for x < 0, -inf for 0). x = m 2^e with m in [sqrt(1/2), sqrt(2)),
// log(m) = 2 atanh(s), s = (m-1)/(m+1), odd series to s^11.
inline float log_f32(float x) {
  if (std::isnan(x) || x < 0.0f) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0.0f) return -std::numeric_limits<float>::infinity();
  if (std::isinf(x)) return x;
  int32_t e = 0;
  if (x < 1.17549435e-38f) {  // subnormal: scale up by 2^23
    x *= 8388608.0f;
    e = -23;
  }
  uint32_t b = float_to_bits(x);
  e += static_cast<int32_t>(b >> 23) - 127;
  float m = bits_to_float((b & 0x7fffffu) | 0x3f800000u);  // [1, 2)
  if (m > 1.41421356f) {
    m *= 0.5f;
    ++e;
  }
  const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  float p = 2.0f / 11.0f;
  p = std::fma(p, s2, 2.0f / 9.0f);
  p = std::fma(p, s2, 2.0f / 7.0f);
  p = std::fma(p, s2, 2.0f / 5.0f);
  p = std::fma(p, s2, 2.0f / 3.0f);
  p = std::fma(p, s2, 2.0f);
  const float logm = p * s;
  const float fe = static_cast<float>(e);
  return std::fma(fe, 0.693145751953125f, std::fma(fe, 1.428606765330187045e-06f, logm));
}

inline float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }
inline float silu_f32(float x) { return x / (1.0f + exp_f32(-x)); }
// log(1 + u) accurate for small u: the rounding of 1 + u is corrected by u / ((1 + u) - 1).
inline float log1p_f32(float u) {
  const float w = 1.0f + u;
  if (w == 1.0f) return u;
  return log_f32(w) * (u / (w - 1.0f));
}
// softplus with PyTorch's threshold: x for x > 20.
inline float softplus_f32(float x) { return x > 20.0f ? x : log1p_f32(exp_f32(x)); }

// gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Since 1 + tanh(u) =
// 2 sigmoid(2u), it is x * sigmoid(2u) = x / (1 + exp(-z)) with z = x (c1 + c2 x^2),
// c1 = 2 sqrt(2/pi), c2 = 0.044715 c1: no cancellation near 0 and one exp, the same shape as
// silu_f32. The SIMD kernels run these operations lane by lane (fma included).
inline constexpr float kGeluC1 = 1.5957691216057308f;    // 2 * sqrt(2 / pi)
inline constexpr float kGeluC2 = 0.07135481627260025f;   // 0.044715 * kGeluC1
inline float gelu_tanh_f32(float x) {
  const float z = x * std::fma(kGeluC2, x * x, kGeluC1);
  return x / (1.0f + exp_f32(-z));
}

// tanh through exp_f32: tanh(|y|) = (1 - e) / (1 + e), e = exp(-2|y|), sign restored. Its
// absolute error is a few 1e-8 (relative error grows only as y -> 0, where the value does too),
// which is what soft-capping needs: cap * tanh(x / cap) of logits.
inline float tanh_f32(float y) {
  if (std::isnan(y)) return y;
  const float e = exp_f32(-2.0f * std::fabs(y));
  const float t = (1.0f - e) / (1.0f + e);
  return std::signbit(y) ? -t : t;
}
// Gemma's logit soft-capping: cap * tanh(x / cap).
inline float softcap_f32(float x, float cap) { return cap * tanh_f32(x / cap); }

}  // namespace lockstep::kernels
