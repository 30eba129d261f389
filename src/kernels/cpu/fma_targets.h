// Which Highway targets may run lockstep's SIMD kernels. The schedule (schedule.h) is made of
// fused multiply-adds; on targets where Highway's MulAdd is a separate multiply and add (SSE2/
// SSSE3/SSE4, EMU128, SCALAR) the kernels fall back to the scalar oracle, which uses std::fma and
// gives the same bits, slowly. Include after hwy/highway.h, inside the per-target namespace.
#pragma once

#define LOCKSTEP_HWY_NO_FMA                                                                   \
  (HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_EMU128 ||          \
   HWY_TARGET == HWY_SCALAR)

// The SVE targets (scalable SVE and SVE2, fixed-length SVE_256 and SVE2_128). Their vectors are
// sizeless types, which C++ allows in no array, class member or by-value lambda capture, so the
// kernels whose tiles are arrays of accumulators (linear, float quant linear, attention) cannot
// be compiled for them: on SVE those run the NEON target's code, which every SVE machine has
// (the same bits, as on every target). Kernels written without such arrays run SVE code.
#define LOCKSTEP_HWY_SVE                                                                      \
  (HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE2 || HWY_TARGET == HWY_SVE_256 ||           \
   HWY_TARGET == HWY_SVE2_128)
