// Row-wise and element-wise kernels. Each row is reduced by one thread in a fixed order (the
// 16-lane schedule for sums), and transcendentals come from math.h, so results are a function of
// the row alone.
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/profile.h"
#include "kernels/math.h"
#include "kernels/ops.h"
#include "kernels/ref/quant_ref.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/schedule.h"

namespace lockstep::kernels {

void embedding(const Weight& table, std::span<const int32_t> ids, float* out) {
  profile::Scope prof(profile::Op::Embedding);
  const int64_t D = table.cols;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= table.rows)
      fail("token id ", id, " is outside the vocabulary [0, ", table.rows, ")");
    float* row = out + static_cast<int64_t>(i) * D;
    if (table.quant != QuantFormat::None) {
      ref::dequantize_row(table, id, row);
      continue;
    }
    switch (table.dtype) {
      case DType::F32:
        std::memcpy(row, static_cast<const float*>(table.data) + id * D, D * sizeof(float));
        break;
      default:
        for (int64_t d = 0; d < D; ++d) row[d] = ref::weight_at(table.dtype, table.data, D, id, d);
    }
  }
}

void rope(float* x, int64_t M, int64_t heads, int64_t head_dim, int64_t rotary_dim,
          const float* cos_sin) {
  profile::Scope prof(profile::Op::Rope);
  const int64_t half = rotary_dim / 2;
  for (int64_t m = 0; m < M; ++m) {
    const float* c = cos_sin + m * rotary_dim;
    const float* s = c + half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (m * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        // q*cos + rotate_half(q)*sin, with rotate_half(q) = [-q2, q1]; no contraction.
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

void softmax(float* x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::fmax(mx, x[i]);
  float lanes[kLanes] = {};
  for (int64_t i = 0; i < n; ++i) {
    x[i] = exp_f32(x[i] - mx);
    lanes[i % kLanes] += x[i];
  }
  const float inv = 1.0f / fold_lanes(lanes);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

int64_t argmax(const float* x, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
  return best < 0 ? 0 : best;
}

}  // namespace lockstep::kernels
