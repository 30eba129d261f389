// The quantized branch of kernels::linear() (linear_quant.cpp): linear() routes any weight with
// quant != QuantFormat::None here.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace lockstep::kernels {

void linear_quant(const float* x, int64_t M, const Weight& w, const float* bias, float* y,
                  ThreadPool& pool);

// The pieces of linear_quant for kernels::linear_multi: x with each 16-block in the nibble order
// of 4-bit codes (M * K floats into xperm), and columns [n0, n1) of y = x W^T without bias.
void quant_permute_x(const float* x, int64_t M, int64_t K, std::vector<float>& xperm);
void quant_linear_cols(const float* x, const float* xperm, int64_t M, const Weight& w, int64_t n0,
                       int64_t n1, float* y);

}  // namespace lockstep::kernels
