// The reduction schedule every CPU kernel follows (../shared/DESIGN.md, the invariance rule).
//
// A dot product of length K is computed in kLanes = 16 logical float32 lanes: element k is added
// to lane (k mod 16) with one fused multiply-add, in increasing k. K is padded with zeros up to a
// multiple of 16 (so every lane receives the same number of FMAs, fma(0, 0, acc) included). The 16
// lanes are then folded by one fixed tree: lane[l] += lane[l + s] for s = 8, 4, 2, 1.
//
// Quantized weights (quant_format.h) follow the same schedule: each weight element is first
// reconstructed as the float32 fma(q, scale, bias) of its group, then enters the lanes like a float
// weight (group sizes are multiples of 16, so groups never straddle a lane cycle and there is no
// padding). A quantized matrix therefore gives the bits of its dequantized float32 copy.
//
// The schedule is defined in logical lanes, not register widths: AVX-512 holds the 16 lanes in
// one register, AVX2 in two, SSE/NEON in four, the scalar oracle in an array; all give the same
// bits. The row count of a call, the thread count and the tiling never enter it.
#pragma once

#include <cmath>
#include <cstdint>

namespace lockstep::kernels {

inline constexpr int kLanes = 16;

// Folds 16 lane partial sums with the fixed tree.
inline float fold_lanes(float* lanes) {
  for (int s = kLanes / 2; s >= 1; s /= 2)
    for (int l = 0; l < s; ++l) lanes[l] = lanes[l] + lanes[l + s];
  return lanes[0];
}

// The scalar statement of the schedule, over any element accessors a(k), b(k) returning float.
template <typename A, typename B>
inline float scheduled_dot(int64_t K, A a, B b) {
  float lanes[kLanes] = {};
  const int64_t padded = (K + kLanes - 1) / kLanes * kLanes;
  for (int64_t k = 0; k < padded; ++k) {
    const float x = k < K ? a(k) : 0.0f, y = k < K ? b(k) : 0.0f;
    lanes[k % kLanes] = std::fma(x, y, lanes[k % kLanes]);
  }
  return fold_lanes(lanes);
}

}  // namespace lockstep::kernels
