// The GPU layout of a 4/8-bit affine weight (kernels/cuda/linear_quant.cuh says how the kernels
// read it), built on the host by CudaBackend::place() and by the GPU tests:
// - codes: the source's words unchanged ([rows][cols * bits / 32] uint32);
// - pairs: per (row, group), row-major: for BF16 or F16 scales one uint32, the 16-bit scale in
//   the low half and the 16-bit bias in the high half (bit-exact copies, 4 bytes a row group);
//   for F32 scales two floats {scale, bias}.
// The repacking only moves bits, so every element keeps its defined value fma(q, s, b).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "kernels/ops.h"

namespace lockstep::kernels {

inline int64_t gpu_code_bytes(const Weight& w) { return w.rows * w.cols * w.bits / 8; }
inline int64_t gpu_pair_entry_bytes(const Weight& w) { return w.scale_dtype == DType::F32 ? 8 : 4; }
inline int64_t gpu_pair_bytes(const Weight& w) {
  return w.rows * (w.cols / w.group_size) * gpu_pair_entry_bytes(w);
}

// The pairs of rows [r0, r1) of an affine weight (host pointers; scale dtype BF16, F16 or F32)
// into out (gpu_pair_entry_bytes per group, rows r0.. from out's start).
inline void pack_gpu_pairs(const Weight& w, int64_t r0, int64_t r1, uint8_t* out) {
  const int64_t gpr = w.cols / w.group_size;
  const auto* s = static_cast<const uint8_t*>(w.scales);
  const auto* b = static_cast<const uint8_t*>(w.biases);
  const int64_t es = w.scale_dtype == DType::F32 ? 4 : 2;  // bytes of one scale or bias
  for (int64_t i = r0 * gpr; i < r1 * gpr; ++i) {
    uint8_t* o = out + (i - r0 * gpr) * 2 * es;
    std::memcpy(o, s + i * es, static_cast<size_t>(es));
    std::memcpy(o + es, b + i * es, static_cast<size_t>(es));
  }
}

}  // namespace lockstep::kernels
