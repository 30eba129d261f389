// Scalar oracle of the quantized linear layer (kernels/quant_format.h): the plainest statement of
// its schedule. Each y[m][n] is ref::scheduled_dot over x's row and the dequantized weight row
// (element = fma(q, scale, bias)): the same 16-lane schedule as a float weight, so a quantized
// matrix and its dequantized float32 copy give the same bits. cpu/linear_quant.cpp must match
// this on every Highway target.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace lockstep::kernels::ref {

// y[m][n] for n in [n0, n1), all m < M; y has row stride w.rows.
void quant_linear_cols(const float* x, int64_t M, const Weight& w, int64_t n0, int64_t n1,
                       float* y);

// Row n of an Affine matrix, dequantized into out[0 .. w.cols).
void dequantize_row(const Weight& w, int64_t n, float* out);

}  // namespace lockstep::kernels::ref
