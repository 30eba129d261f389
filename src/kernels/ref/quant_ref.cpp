#include "kernels/ref/quant_ref.h"

#include "kernels/quant_format.h"
#include "kernels/schedule.h"

namespace lockstep::kernels::ref {

void quant_linear_cols(const float* x, int64_t M, const Weight& w, int64_t n0, int64_t n1,
                       float* y) {
  const int64_t K = w.cols, N = w.rows;
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * K;
    for (int64_t n = n0; n < n1; ++n)
      y[m * N + n] = scheduled_dot(
          K, [&](int64_t k) { return xr[k]; }, [&](int64_t k) { return quant_element(w, n, k); });
  }
}

void dequantize_row(const Weight& w, int64_t n, float* out) {
  for (int64_t k = 0; k < w.cols; ++k) out[k] = quant_element(w, n, k);
}

}  // namespace lockstep::kernels::ref
