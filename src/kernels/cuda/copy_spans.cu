// Copies whose addresses come from device memory (cuda_ops.h, copy_spans): a recorded step (CUDA
// graph) saves a hybrid model's rollback data with it, each sequence's buffers named in a table
// uploaded with the step rather than baked into the graph's nodes as a memcpy's would be.
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 256;
constexpr int64_t kBlockBytes = int64_t{kThreads} * 16 * 4;  // 16 KiB: four 16-byte words a thread

// Block (x, y) copies bytes [x * kBlockBytes, (x + 1) * kBlockBytes) of span y.
__global__ void __launch_bounds__(kThreads) copy_spans_kernel(const CopySpan* __restrict__ spans) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const CopySpan s = spans[blockIdx.y];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kBlockBytes;
  if (begin >= s.bytes) return;
  const int64_t end = begin + kBlockBytes < s.bytes ? begin + kBlockBytes : s.bytes;
  char* dst = static_cast<char*>(s.dst);
  const char* src = static_cast<const char*>(s.src);
  const uint64_t align = reinterpret_cast<uint64_t>(dst) | reinterpret_cast<uint64_t>(src) |
                         static_cast<uint64_t>(s.bytes);
  if ((align & 15) == 0) {
    for (int64_t i = begin + threadIdx.x * 16; i < end; i += kThreads * 16)
      *reinterpret_cast<uint4*>(dst + i) = *reinterpret_cast<const uint4*>(src + i);
  } else if ((align & 3) == 0) {
    for (int64_t i = begin + threadIdx.x * 4; i < end; i += kThreads * 4)
      *reinterpret_cast<uint32_t*>(dst + i) = *reinterpret_cast<const uint32_t*>(src + i);
  } else {
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) dst[i] = src[i];
  }
}

}  // namespace

void copy_spans(const CopySpan* spans, int64_t n, int64_t max_bytes) {
  if (n <= 0 || max_bytes <= 0) return;
  if (n > 65535) fail("copy_spans: ", n, " spans in one call (at most 65535)");
  const dim3 grid(static_cast<unsigned>((max_bytes + kBlockBytes - 1) / kBlockBytes),
                  static_cast<unsigned>(n));
  launch("copy_spans_kernel", copy_spans_kernel, grid, dim3(kThreads), 0, spans);
}

}  // namespace lockstep::kernels::cuda
