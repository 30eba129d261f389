#include "models/rope_freqs.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace lockstep {

namespace {

// yarn: the dimension index at which a wavelength makes `rotations` turns over the context.
double correction_dim(double rotations, double dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

}  // namespace

kernels::RopeTable make_rope_table(const ModelConfig& c) {
  const int64_t dim = c.rotary_dim();
  const int64_t half = dim / 2;
  const double base = c.rope_theta;
  const RopeScaling& rs = c.rope_scaling;
  std::vector<double> inv(half);
  // transformers computes base ** (2i / dim) with a float32 exponent.
  for (int64_t i = 0; i < half; ++i)
    inv[i] = 1.0 / std::pow(base, static_cast<double>(static_cast<float>(2 * i) / dim));
  double attention_scaling = 1.0;

  if (rs.type == "default") {
  } else if (rs.type == "linear") {
    for (auto& f : inv) f /= rs.factor;
  } else if (rs.type == "llama3") {
    const double old_ctx = static_cast<double>(rs.original_max_position_embeddings);
    const double low_wavelen = old_ctx / rs.low_freq_factor;
    const double high_wavelen = old_ctx / rs.high_freq_factor;
    for (auto& f : inv) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      double scaled = wavelen > low_wavelen ? f / rs.factor : f;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      if (medium) {
        const double smooth =
            (old_ctx / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
        scaled = (1.0 - smooth) * scaled / rs.factor + smooth * scaled;
      }
      f = scaled;
    }
  } else if (rs.type == "yarn") {
    const double factor = rs.factor;
    const double orig = rs.original_max_position_embeddings > 0
                            ? static_cast<double>(rs.original_max_position_embeddings)
                            : static_cast<double>(c.max_position_embeddings);
    attention_scaling = rs.attention_factor > 0
                            ? rs.attention_factor
                            : (factor <= 1.0 ? 1.0 : 0.1 * std::log(factor) + 1.0);
    double low = correction_dim(rs.beta_fast, dim, base, orig);
    double high = correction_dim(rs.beta_slow, dim, base, orig);
    if (rs.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < half; ++i) {
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double extrapolation_factor = 1.0 - ramp;
      const double extrapolation = inv[i], interpolation = inv[i] / factor;
      inv[i] = interpolation * (1.0 - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
  } else {
    fail(c.source, ": rope_scaling type \"", rs.type,
         "\" is not supported (expected default, linear, llama3 or yarn)");
  }
  std::vector<float> inv_f(inv.begin(), inv.end());
  return kernels::RopeTable(std::move(inv_f), static_cast<float>(attention_scaling));
}

}  // namespace lockstep
