// Scalar oracle of the integer-dot quantized linear (kernels/quant_int8.h): the plainest
// statement of its activation quantization and of its group schedule. cpu/act_quant.cpp and
// cpu/linear_quant_int8.cpp must give these bits on every Highway target.
#pragma once

#include <cstdint>

#include "kernels/ops.h"
#include "kernels/quant_int8.h"

namespace lockstep::kernels::ref {

// Quantizes x ([M][K]) in blocks of `block` elements into a (the 4-bit order too when
// K % kNibbleBlock == 0).
void quantize_acts(const float* x, int64_t M, int64_t K, int64_t block, Int8Acts& a);

// y[m][n] for n in [n0, n1), all m < a.M, from activations quantized for w's group size; y has
// row stride w.rows.
void int8_linear_cols(const Int8Acts& a, const Weight& w, int64_t n0, int64_t n1, float* y);

// quantize_acts, then int8_linear_cols: the whole int8 linear of x without bias.
void quant_int8_linear_cols(const float* x, int64_t M, const Weight& w, int64_t n0, int64_t n1,
                            float* y);

}  // namespace lockstep::kernels::ref
