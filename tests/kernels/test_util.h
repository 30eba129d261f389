// Helpers for kernel tests: deterministic random data and bitwise comparisons.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"

namespace lockstep::test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Raw weight bytes of the given dtype holding (rounded) random values.
inline std::vector<uint8_t> random_weight(DType t, size_t n, uint32_t seed) {
  const auto f = random_floats(n, seed, 0.5f);
  std::vector<uint8_t> out(n * dtype_size(t));
  for (size_t i = 0; i < n; ++i) {
    if (t == DType::F32) {
      std::memcpy(&out[i * 4], &f[i], 4);
    } else {
      const uint16_t h = t == DType::BF16 ? f32_to_bf16(f[i]) : f32_to_f16(f[i]);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

// Targets a loop over hwy::SupportedAndGeneratedTargets() must at least visit. x86's baseline is
// no Highway target, so a build there always has a SIMD target and the scalar fallback; on
// aarch64 NEON is the baseline and no fallback is compiled, so a CPU without SVE has one target.
#if defined(__x86_64__) || defined(__i386__)
inline constexpr int kMinTargets = 2;
#else
inline constexpr int kMinTargets = 1;
#endif

inline bool same_bits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

}  // namespace lockstep::test
