// Which Highway targets may run lockstep's SIMD kernels. The schedule (schedule.h) is made of
// fused multiply-adds; on targets where Highway's MulAdd is a separate multiply and add (SSE2/
// SSSE3/SSE4, EMU128, SCALAR) the kernels fall back to the scalar oracle, which uses std::fma and
// gives the same bits, slowly. Include after hwy/highway.h, inside the per-target namespace.
#pragma once

#define LOCKSTEP_HWY_NO_FMA                                                                   \
  (HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_EMU128 ||          \
   HWY_TARGET == HWY_SCALAR)
