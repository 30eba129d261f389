#include "kernels/cpu/quant_panels.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
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
  s.last = groups - (s.chunks - 1) * kLanes;
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
    if (p + 1 == s.panels) std::memset(panel + s.panel_bytes(), 0, kPanelTail);
    for (int64_t c = 0; c < s.chunks; ++c) {
      const int64_t width = s.width(c);
      uint8_t* chunk = panel + s.chunk_offset(c);
      uint8_t* sv = chunk + s.code_bytes(width);
      for (int64_t j = 0; j < kPanelRows; ++j) {
        const int64_t r = p * kPanelRows + j;
        if (r >= w.rows) break;
        for (int64_t v = 0; v < width; ++v) {
          const uint8_t* src = codes + r * row_bytes + (c * kLanes + v) * s.words * 4;
          for (int64_t k = 0; k < s.words; ++k)
            std::memcpy(chunk + ((k * kPanelRows + j) * width + v) * 4, src + k * 4, 4);
        }
        const int64_t at = (r * groups + c * kLanes) * vb, n = width * vb;
        std::memcpy(sv + j * n, scales + at, static_cast<size_t>(n));
        std::memcpy(sv + s.values_bytes(width) + j * n, biases + at, static_cast<size_t>(n));
      }
    }
  }
}

PanelArena::~PanelArena() {
  for (const auto& [p, bytes] : slabs_) munmap(p, bytes);
}

uint8_t* PanelArena::allocate(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20, kSlab = size_t{64} << 20;
  bytes = (bytes + 63) / 64 * 64;
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > left_) {
    const size_t size = std::max(kSlab, (bytes + kHuge - 1) / kHuge * kHuge);
    // Over-reserve one huge page to align the slab's start; the slack stays reserved, untouched.
    void* map = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (map == MAP_FAILED) fail("cannot allocate ", size, " bytes for the CPU weight panels");
    slabs_.emplace_back(map, size + kHuge);
    const uintptr_t at = (reinterpret_cast<uintptr_t>(map) + kHuge - 1) / kHuge * kHuge;
    next_ = reinterpret_cast<uint8_t*>(at);
    left_ = size;
    madvise(next_, size, MADV_HUGEPAGE);  // a hint: without THP the slab is ordinary pages
  }
  uint8_t* p = next_;
  next_ += bytes;
  left_ -= bytes;
  return p;
}

}  // namespace lockstep::kernels
