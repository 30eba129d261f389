#include "kernels/ref/quant_int8_ref.h"

#include <cmath>

#include "kernels/quant_format.h"
#include "kernels/schedule.h"

namespace lockstep::kernels::ref {

void quantize_acts(const float* x, int64_t M, int64_t K, int64_t block, Int8Acts& a) {
  a.M = M;
  a.K = K;
  a.block = block;
  a.blocks = K / block;
  a.blocks_padded = (a.blocks + kLanes - 1) / kLanes * kLanes;
  a.q.assign(static_cast<size_t>(M * K), 0);
  a.d.assign(static_cast<size_t>(M * a.blocks_padded), 0.0f);
  a.e.assign(a.d.size(), 0.0f);
  a.sum.assign(a.d.size(), 0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < a.blocks; ++b) {
      const float* xb = x + m * K + b * block;
      int8_t* qb = a.q.data() + m * K + b * block;
      float amax = 0.0f;
      for (int64_t i = 0; i < block; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
      const float d = amax / 127.0f;
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      int32_t sum = 0;
      for (int64_t i = 0; i < block; ++i) {
        qb[i] = static_cast<int8_t>(std::nearbyint(xb[i] * inv));
        sum += qb[i];
      }
      const int64_t at = m * a.blocks_padded + b;
      a.d[at] = d;
      a.sum[at] = sum;
      a.e[at] = d * static_cast<float>(sum);
    }
  a.qnib.clear();
  if (K % kNibbleBlock != 0) return;
  a.qnib.resize(a.q.size());
  constexpr int64_t kHalf = kNibbleBlock / 2;
  for (int64_t s = 0; s < M * K; s += kNibbleBlock)
    for (int64_t i = 0; i < kHalf; ++i) {
      a.qnib[s + i] = a.q[s + 2 * i];
      a.qnib[s + kHalf + i] = a.q[s + 2 * i + 1];
    }
}

void int8_linear_cols(const Int8Acts& a, const Weight& w, int64_t n0, int64_t n1, float* y) {
  const int64_t K = w.cols, G = w.group_size, groups = K / G, N = w.rows;
  for (int64_t m = 0; m < a.M; ++m) {
    const int8_t* xq = a.row(m);
    const float* d = a.d.data() + m * a.blocks_padded;
    const float* e = a.e.data() + m * a.blocks_padded;
    for (int64_t n = n0; n < n1; ++n) {
      float lanes[kLanes] = {};
      for (int64_t g = 0; g < groups; ++g) {
        int32_t isum = 0;
        for (int64_t k = g * G; k < (g + 1) * G; ++k)
          isum += static_cast<int32_t>(quant_code(w, n, k)) * xq[k];
        const int64_t at = n * groups + g;
        const float s = scalar_at(w.scale_dtype, w.scales, at);
        const float b = scalar_at(w.scale_dtype, w.biases, at);
        const float p = d[g] * static_cast<float>(isum);
        float& lane = lanes[g % kLanes];
        lane = std::fma(s, p, lane);
        lane = std::fma(b, e[g], lane);
      }
      y[m * N + n] = fold_lanes(lanes);
    }
  }
}

void quant_int8_linear_cols(const float* x, int64_t M, const Weight& w, int64_t n0, int64_t n1,
                            float* y) {
  Int8Acts a;
  quantize_acts(x, M, w.cols, w.group_size, a);
  int8_linear_cols(a, w, n0, n1, y);
}

}  // namespace lockstep::kernels::ref
