// Rotary frequencies and the cos/sin of a position. The angle is computed in float32 as
// transformers does (inv_freq * position, both float32), then cos/sin in double rounded to float:
// a pure function of (position, i), so it never depends on which rows share a call.
#pragma once

#include <cstdint>
#include <vector>

namespace lockstep::kernels {

class RopeTable {
 public:
  RopeTable() = default;
  // inv_freq: rotary_dim/2 inverse frequencies; attention_scaling multiplies cos and sin (yarn).
  RopeTable(std::vector<float> inv_freq, float attention_scaling)
      : inv_freq_(std::move(inv_freq)), scaling_(attention_scaling) {}

  int64_t rotary_dim() const { return static_cast<int64_t>(inv_freq_.size()) * 2; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  float attention_scaling() const { return scaling_; }

  // out: [M][rotary_dim] = half cosines, half sines for each position.
  void fill(const int64_t* positions, int64_t M, float* out) const;

 private:
  std::vector<float> inv_freq_;
  float scaling_ = 1.0f;
};

}  // namespace lockstep::kernels
