// The quantized branch of kernels::linear() (linear_quant.cpp): linear() routes any weight with
// quant != QuantFormat::None here. Two dot products, chosen by kernels::quant_dot()
// (numerics.h): `float` (linear_quant.cpp: exactly dequantized weights, the float schedule) and
// `int8` (linear_quant_int8.cpp: int8 activation blocks, exact integer group sums).
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/numerics.h"
#include "kernels/ops.h"
#include "kernels/quant_int8.h"

namespace lockstep::kernels {

void linear_quant(const float* x, int64_t M, const Weight& w, const float* bias, float* y,
                  ThreadPool& pool);

// What the quantized kernels read besides x, made once per call before the columns are split
// over threads (M * K work, beside N * K for the weights).
struct QuantInput {
  QuantDot mode = QuantDot::Float;
  std::vector<float> xperm;  // float: x with each 16-block in the nibble order of 4-bit codes
  Int8Acts acts;             // int8: x's codes in blocks of the weights' group size
};

// Prepares `in` from x ([M][K]) for quantized weights of K columns in the current quant_dot()
// mode: `any4bit` says whether one of them has 4-bit codes, `group` is their group size (the
// int8 mode needs one group size per QuantInput), `panels` whether one of them has CPU panels
// (quant_panels.h: the activations are then also made in their order at every M).
void prepare_quant_input(const float* x, int64_t M, int64_t K, bool any4bit, int64_t group,
                         bool panels, QuantInput& in);

// Columns [n0, n1) of y = x W^T without bias, from x and its prepared input.
void quant_linear_cols(const float* x, const QuantInput& in, int64_t M, const Weight& w,
                       int64_t n0, int64_t n1, float* y);

}  // namespace lockstep::kernels
