#include "kernels/rope_table.h"

#include <cmath>

namespace lockstep::kernels {

void RopeTable::fill(const int64_t* positions, int64_t M, float* out) const {
  const int64_t half = static_cast<int64_t>(inv_freq_.size());
  for (int64_t m = 0; m < M; ++m) {
    float* row = out + m * 2 * half;
    const float pos = static_cast<float>(positions[m]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq_[i];
      row[i] = static_cast<float>(std::cos(static_cast<double>(angle))) * scaling_;
      row[half + i] = static_cast<float>(std::sin(static_cast<double>(angle))) * scaling_;
    }
  }
}

}  // namespace lockstep::kernels
