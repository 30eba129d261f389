#include "kernels/cpu/quant_panels.h"

#include <algorithm>
#include <cstring>

#include "kernels/quant_int8.h"

namespace lockstep::kernels {

bool panels_cover(const Weight& w) {
  if (w.quant != QuantFormat::Affine || (w.bits != 4 && w.bits != 8) || w.group_size <= 0)
    return false;
  if (w.scale_dtype != DType::F32 && w.scale_dtype != DType::BF16 && w.scale_dtype != DType::F16)
    return false;
  const int64_t unit = w.bits == 4 ? kNibbleBlock : 64;
  return interleaved_groups(w.bits, w.group_size) && w.cols % w.group_size == 0 &&
         w.cols % unit == 0;
}

PanelShape panel_shape(const Weight& w) {
  PanelShape s;
  const int64_t groups = w.cols / w.group_size;
  s.words = w.group_size * w.bits / 32;
  s.chunks = (groups + kLanes - 1) / kLanes;
  s.value_bytes = static_cast<int64_t>(dtype_size(w.scale_dtype));
  s.panels = (w.rows + kPanelRows - 1) / kPanelRows;
  return s;
}

void pack_panels(const Weight& w, int64_t p0, int64_t p1, uint8_t* out) {
  const PanelShape s = panel_shape(w);
  const int64_t groups = w.cols / w.group_size, row_bytes = w.cols * w.bits / 8;
  const int64_t vb = s.value_bytes;
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const uint8_t*>(w.scales);
  const auto* biases = static_cast<const uint8_t*>(w.biases);
  for (int64_t p = p0; p < p1; ++p) {
    uint8_t* panel = out + p * s.panel_bytes();
    std::memset(panel, 0, static_cast<size_t>(s.panel_bytes()));
    for (int64_t j = 0; j < kPanelRows; ++j) {
      const int64_t r = p * kPanelRows + j;
      if (r >= w.rows) break;
      for (int64_t c = 0; c < s.chunks; ++c) {
        uint8_t* chunk = panel + c * s.chunk_bytes();
        const int64_t valid = std::min<int64_t>(kLanes, groups - c * kLanes);
        for (int64_t g = 0; g < valid; ++g) {
          const int64_t group = c * kLanes + g;
          const uint8_t* src = codes + r * row_bytes + group * s.words * 4;
          for (int64_t k = 0; k < s.words; ++k)
            std::memcpy(chunk + ((k * kPanelRows + j) * kLanes + g) * 4, src + k * 4, 4);
        }
        const int64_t at = (r * groups + c * kLanes) * vb;
        uint8_t* sv = chunk + s.code_bytes() + j * kLanes * vb;
        std::memcpy(sv, scales + at, static_cast<size_t>(valid * vb));
        std::memcpy(sv + s.values_bytes(), biases + at, static_cast<size_t>(valid * vb));
      }
    }
  }
}

}  // namespace lockstep::kernels
