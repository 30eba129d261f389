#include "kernels/cpu/cpu_tuning.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace lockstep::kernels {

namespace {
// 6 to 8 KB read at 0.9 to 1.0 of a plain sequential sum over the same bytes on the development
// VM (AMD EPYC, Zen 5; 1 and 2 threads, weights from DRAM); a whole tile ahead 0.84 to 0.93; 12 KB
// and more fall behind again, likely because prefetched lines leave the 48 KB L1 before use.
constexpr int64_t kDefaultPrefetchBytes = 6144;

int64_t read_prefetch_bytes() {
  const char* v = std::getenv("LOCKSTEP_CPU_PREFETCH_BYTES");
  if (!v || !*v) return kDefaultPrefetchBytes;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < 0 || n > (1 << 20))
    fail("LOCKSTEP_CPU_PREFETCH_BYTES=", v, ": expected a byte count from 0 to 1048576");
  return n;
}

// prefetcht2 on Intel, prefetchnta elsewhere. Measured on the GPU machine's host (Intel Xeon, 16
// cores; Qwen3-0.6B shape, BF16, 2 threads, tools/bench/cpu_decode_study.sh): prefetchnta 10.0
// tok/s, no software prefetch 13.0, prefetcht2 19.0, prefetcht0 17.4 (llama.cpp 13.2). Intel cores
// track prefetchnta lines in the L1's few fill buffers, so the streams starve for lines in flight;
// t2 lines go through the L2's larger queue. The AMD figures behind the 6 KB distance were
// measured with prefetchnta, which stays its default there until measured otherwise.
int default_prefetch_locality() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_is("intel")) return 1;
#endif
  return 0;
}

int read_prefetch_locality() {
  const char* v = std::getenv("LOCKSTEP_CPU_PREFETCH_HINT");
  if (!v || !*v) return default_prefetch_locality();
  if (std::strcmp(v, "nta") == 0) return 0;
  if (std::strcmp(v, "t2") == 0) return 1;
  if (std::strcmp(v, "t1") == 0) return 2;
  if (std::strcmp(v, "t0") == 0) return 3;
  fail("LOCKSTEP_CPU_PREFETCH_HINT=", v, ": expected nta, t2, t1 or t0");
}

}  // namespace

// The environment's values on first use; set_gemv_prefetch replaces them.
std::atomic<int64_t>& prefetch_bytes() {
  static std::atomic<int64_t> bytes{read_prefetch_bytes()};
  return bytes;
}
std::atomic<int>& prefetch_locality() {
  static std::atomic<int> locality{read_prefetch_locality()};
  return locality;
}

int64_t gemv_prefetch_bytes() { return prefetch_bytes().load(std::memory_order_relaxed); }
int gemv_prefetch_locality() { return prefetch_locality().load(std::memory_order_relaxed); }

void set_gemv_prefetch(int64_t bytes, int locality) {
  if (bytes < 0 || locality < 0 || locality > 3)
    fail("set_gemv_prefetch: bytes ", bytes, " (expected >= 0), locality ", locality,
         " (expected 0..3)");
  prefetch_bytes() = bytes;
  prefetch_locality() = locality;
}

}  // namespace lockstep::kernels
