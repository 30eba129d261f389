// int8 activation blocks for the integer-dot quantized linear (kernels/quant_int8.h), SIMD on
// every target with fused MulAdd, the scalar oracle elsewhere; the same bits either way.
#pragma once

#include <cstdint>

#include "kernels/quant_int8.h"

namespace lockstep::kernels {

// x: [M][K]; block: the weight group size (a multiple of 16 dividing K).
void quantize_acts(const float* x, int64_t M, int64_t K, int64_t block, Int8Acts& a);

}  // namespace lockstep::kernels
