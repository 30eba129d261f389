// The quantized branch of kernels::linear() (linear_quant.cpp): linear() routes any weight with
// quant != QuantFormat::None here.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace lockstep::kernels {

void linear_quant(const float* x, int64_t M, const Weight& w, const float* bias, float* y,
                  ThreadPool& pool);

}  // namespace lockstep::kernels
