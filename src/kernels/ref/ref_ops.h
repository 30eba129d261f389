// Scalar oracles: the plainest statement of each kernel's schedule (schedule.h), written with
// std::fma. The SIMD kernels must match them bit for bit on every target; tests force each
// compiled Highway target and compare.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace lockstep::kernels::ref {

// Weight element (n, k) of a [N][K] matrix as float32.
float weight_at(DType dtype, const void* w, int64_t K, int64_t n, int64_t k);

// y[m][n] for n in [n0, n1), all m < M; y has row stride N.
void linear_cols(const float* x, int64_t M, DType dtype, const void* w, int64_t K, int64_t n0,
                 int64_t n1, float* y, int64_t N);

// The same products summed in a different order (8 lanes, lane = k mod 8): what a kernel tuned
// per shape would do. Used only by `fast` numerics, to measure what breaking the rule costs.
void linear_cols_other_order(const float* x, int64_t M, DType dtype, const void* w, int64_t K,
                             int64_t n0, int64_t n1, float* y, int64_t N);

// Scheduled dot product of two float32 vectors.
float dot(const float* a, const float* b, int64_t K);

}  // namespace lockstep::kernels::ref
