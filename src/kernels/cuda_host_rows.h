// Host-side rows of a checkpoint weight as the CUDA backend uploads them (cuda_backend.cpp's
// place(), and the tensor-parallel emulation's shards, cuda_tp_emulation.cpp): FP32 rows of any
// dtype or the affine format, rounded to BF16 in blocks on the host threads. Plain C++.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/quant_format.h"
#include "kernels/ref/quant_ref.h"
#include "kernels/ref/ref_ops.h"

namespace lockstep::kernels {

// Row r of a host weight as float32 (any dtype or the affine format).
inline void host_row(const Weight& w, int64_t r, float* out) {
  if (w.quant != QuantFormat::None) {
    ref::dequantize_row(w, r, out);
    return;
  }
  for (int64_t k = 0; k < w.cols; ++k) out[k] = ref::weight_at(w.dtype, w.data, w.cols, r, k);
}

// The rows of a host weight as BF16 (f32_to_bf16 of host_row: what place() uploads), converted on
// the host threads in blocks of about 16 MiB: fn(first row, rows, data [rows][cols]) for each.
template <typename Fn>
void for_bf16_row_blocks(const Weight& host, ThreadPool& threads, Fn&& fn) {
  const int64_t rows_per = std::max<int64_t>(1, (int64_t{16} << 20) / (host.cols * 2));
  std::vector<uint16_t> buf;
  for (int64_t r0 = 0; r0 < host.rows; r0 += rows_per) {
    const int64_t n = std::min(rows_per, host.rows - r0);
    buf.resize(n * host.cols);
    threads.parallel_for(n, [&](int64_t a, int64_t b) {
      std::vector<float> row(host.cols);
      for (int64_t r = a; r < b; ++r) {
        host_row(host, r0 + r, row.data());
        for (int64_t k = 0; k < host.cols; ++k) buf[r * host.cols + k] = f32_to_bf16(row[k]);
      }
    });
    fn(r0, n, buf.data());
  }
}

}  // namespace lockstep::kernels
