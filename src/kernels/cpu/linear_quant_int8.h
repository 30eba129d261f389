// The integer-dot quantized linear (kernels/quant_int8.h, cpu/linear_quant_int8.cpp).
#pragma once

#include <cstdint>

#include "kernels/ops.h"
#include "kernels/quant_int8.h"

namespace lockstep::kernels {

// Columns [n0, n1) of y = x W^T without bias, for every row of `a` (x quantized by
// quantize_acts with block = w.group_size); y has row stride w.rows.
void int8_linear_cols(const Int8Acts& a, const Weight& w, int64_t n0, int64_t n1, float* y);

}  // namespace lockstep::kernels
