// The CPU's load-time layout of a 4/8-bit affine weight for the int8 quant dot
// (kernels/quant_int8.h): "panels" of kPanelRows weight rows, each one contiguous stream holding
// the rows' codes already in the group-interleaved order of Int8Acts::qgrp, with their scales
// and biases beside them. CpuBackend::place() builds it once; the kernels
// (cpu/linear_quant_int8.cpp) then read one DRAM stream per tile of kPanelRows rows instead of
// one per row plus two for the scales, and never transpose codes per call.
//
// Panel p holds rows [p * kPanelRows, (p + 1) * kPanelRows) (past `rows`: zero rows). For each
// chunk c of up to 16 groups (the schedule's lane cycle; width V = 16, the last chunk of a row
// whose group count is not a multiple of 16 only its remaining groups), chunk_bytes(V):
//   codes:  for word k of a group (words per group), for row j of the panel: V uint32, word v =
//           word k of group 16c + v of row j;
//   scales: for row j: V values of scale_dtype (groups 16c ..);
//   biases: the same for the biases.
// So a weight whose rows have fewer than 16 groups (an MoE down projection of width 768 at group
// 64: 12) streams no padding. bytes() ends with kPanelTail spare bytes, which the kernels' 16-value
// scale loads of a narrow chunk may read (and mask off).
// The repacking only moves bits: every element keeps its value fma(q, s, b), and the integer
// sums the kernels form from it are those of the checkpoint's layout (exact either way).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/dtype.h"
#include "kernels/ops.h"
#include "kernels/schedule.h"

namespace lockstep::kernels {

inline constexpr int64_t kPanelRows = 4;
inline constexpr int64_t kPanelTail = 64;

struct PanelShape {
  int64_t words = 0;        // code words (uint32) per group
  int64_t chunks = 0;       // chunks of up to 16 groups per row
  int64_t last = 0;         // groups in the last chunk (1..16)
  int64_t value_bytes = 0;  // bytes of one scale or bias
  int64_t panels = 0;

  int64_t width(int64_t c) const { return c + 1 < chunks ? kLanes : last; }
  // Per chunk of `width` groups: the codes, one row's scales, the chunk.
  int64_t code_bytes(int64_t width) const { return kPanelRows * words * width * 4; }
  int64_t values_bytes(int64_t width) const { return kPanelRows * width * value_bytes; }
  int64_t chunk_bytes(int64_t width) const { return code_bytes(width) + 2 * values_bytes(width); }
  // Chunk c starts c full chunks into its panel (only the last can be narrower).
  int64_t chunk_offset(int64_t c) const { return c * chunk_bytes(kLanes); }
  int64_t panel_bytes() const { return chunk_offset(chunks - 1) + chunk_bytes(last); }
  int64_t bytes() const { return panels * panel_bytes() + kPanelTail; }
};

// Whether the CPU lays `w` out in panels: a 4/8-bit affine weight whose groups are 4, 8 or 16
// code words (what the group-interleaved kernels cover), and whose rows the 4-bit activation
// order covers (cols % 128 == 0; 8-bit: cols % 64 == 0).
bool panels_cover(const Weight& w);
PanelShape panel_shape(const Weight& w);

// Writes panels [p0, p1) of w into `out` (panel_shape(w).bytes() bytes; the tail is zeroed with
// the last panel).
void pack_panels(const Weight& w, int64_t p0, int64_t p1, uint8_t* out);

// Memory for panels: 64-byte aligned pieces of large anonymous mappings in 2 MB-aligned slabs
// that ask for transparent huge pages (MADV_HUGEPAGE), so packing a model faults in 512 times
// fewer pages and decode's weight stream misses the TLB 512 times less often; an MoE layer's
// many small experts share slabs instead of each rounding up to a page size. Thread-safe; the
// memory lives as long as the arena.
class PanelArena {
 public:
  PanelArena() = default;
  PanelArena(const PanelArena&) = delete;
  PanelArena& operator=(const PanelArena&) = delete;
  ~PanelArena();
  uint8_t* allocate(size_t bytes);

 private:
  std::mutex mu_;
  std::vector<std::pair<void*, size_t>> slabs_;
  uint8_t* next_ = nullptr;
  size_t left_ = 0;
};

}  // namespace lockstep::kernels
