#include "kernels/cpu/cpu_tuning.h"

#include <algorithm>
#include <atomic>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace lockstep::kernels {

namespace {
bool intel_cpu() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_is("intel");
#else
  return false;
#endif
}

// AMD family 25 (0x19): Zen 3 and Zen 4. Their cores were measured to want one sequential weight
// stream per thread (default_gemv_rows() says why).
bool amd_family_25() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (!__builtin_cpu_is("amd")) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned base = (eax >> 8) & 0xf;
  const unsigned family = base == 0xf ? base + ((eax >> 20) & 0xff) : base;
  return family == 0x19;
#else
  return false;
#endif
}

// 6 to 8 KB read at 0.9 to 1.0 of a plain sequential sum over the same bytes on the development
// VM (AMD EPYC, Zen 5; 1 and 2 threads, weights from DRAM); a whole tile ahead 0.84 to 0.93; 12 KB
// and more fall behind again, likely because prefetched lines leave the 48 KB L1 before use.
// Zen 4 reads its single stream per thread (one-row tiles) best with none: BF16 decode 16.4-18.4
// tok/s without against 13.5-15.8 with 6 KB at 1 thread, 8-bit 28.8-31.6 against 25.3-27.1,
// 4-bit alike (Qwen3-0.6B shape, 2-core Zen 4 VM, docs/benchmarks.md).
int64_t default_prefetch_bytes() { return amd_family_25() ? 0 : 6144; }

int64_t read_prefetch_bytes() {
  const char* v = std::getenv("LOCKSTEP_CPU_PREFETCH_BYTES");
  if (!v || !*v) return default_prefetch_bytes();
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
int default_prefetch_locality() { return intel_cpu() ? 1 : 0; }

// A panel is one contiguous stream per tile, which the hardware prefetcher follows on its own:
// on a 2-core Intel Xeon VM (AVX-512 VNNI, AMX; 2026-12-05) a plain sum read 16.8 GB/s at 1
// thread and 32.6 at 2 without software prefetch against 15.7 and 30.7 with prefetcht2 6 KB
// ahead, and decode on panels ran 7-11% faster without it (4-bit Qwen3-1.7B and Qwen3-30B-A3B
// shapes; 8-bit within 1%; docs/benchmarks.md). The eight streams of a BF16 8-row tile still
// want it there (8.5 against 7.2 tok/s), so only panels drop it. Elsewhere: as the GEMV.
int64_t read_panel_prefetch_bytes() {
  const char* v = std::getenv("LOCKSTEP_CPU_PANEL_PREFETCH_BYTES");
  if (!v || !*v) return intel_cpu() ? 0 : read_prefetch_bytes();
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < 0 || n > (1 << 20))
    fail("LOCKSTEP_CPU_PANEL_PREFETCH_BYTES=", v, ": expected a byte count from 0 to 1048576");
  return n;
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

// Eight rows share each activation vector where the hardware keeps eight DRAM streams fed (Zen 5,
// Intel, with the software prefetch above). A Zen 4 core does not: reading 8 (or 2, or 4) rows
// side by side its one-row BF16 GEMV drew 8-15 GB/s from DRAM, one row at a time (one sequential
// stream, which its hardware prefetcher follows) 29 GB/s, above the 23 GB/s a core reads; BF16
// decode went from 10.2 to 14.9 tok/s at 1 thread, 4-bit from 27 to 41, 8-bit from 15 to 28
// (Qwen3-0.6B shape; docs/benchmarks.md). A one-row tile's dot product is one FMA chain, 16
// weights per FMA latency, which still outruns a core's DRAM bandwidth.
int default_gemv_rows() { return amd_family_25() ? 1 : 8; }

int read_gemv_rows() {
  const char* v = std::getenv("LOCKSTEP_CPU_GEMV_ROWS");
  if (!v || !*v) return default_gemv_rows();
  if (std::strcmp(v, "1") == 0) return 1;
  if (std::strcmp(v, "2") == 0) return 2;
  if (std::strcmp(v, "4") == 0) return 4;
  if (std::strcmp(v, "8") == 0) return 8;
  fail("LOCKSTEP_CPU_GEMV_ROWS=", v, ": expected 1, 2, 4 or 8");
}

// Below 4 rows the transpose costs about what the lane trees it saves do (a 64-row block's codes
// are transposed once per call and shared by the call's rows).
int64_t read_interleaved_min_rows() {
  const char* v = std::getenv("LOCKSTEP_CPU_INTERLEAVED_MIN_ROWS");
  if (!v || !*v) return 4;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < 0)
    fail("LOCKSTEP_CPU_INTERLEAVED_MIN_ROWS=", v, ": expected a row count (0: never)");
  return n;
}

bool read_cpu_panels() {
  const char* v = std::getenv("LOCKSTEP_CPU_PANELS");
  if (!v || !*v || std::strcmp(v, "1") == 0) return true;
  if (std::strcmp(v, "0") == 0) return false;
  fail("LOCKSTEP_CPU_PANELS=", v, ": expected 0 or 1");
}

}  // namespace

bool cpu_panels() {
  static const bool on = read_cpu_panels();
  return on;
}

std::atomic<int>& gemv_rows() {
  static std::atomic<int> rows{read_gemv_rows()};
  return rows;
}
int gemv_tile_rows() { return gemv_rows().load(std::memory_order_relaxed); }
int gemv_tile_rows_up_to(int widest) { return std::min(gemv_tile_rows(), widest); }
void set_gemv_tile_rows(int rows) {
  if (rows != 1 && rows != 2 && rows != 4 && rows != 8)
    fail("set_gemv_tile_rows: ", rows, " rows (expected 1, 2, 4 or 8)");
  gemv_rows() = rows;
}

// The environment's values on first use; set_gemv_prefetch replaces them.
std::atomic<int64_t>& prefetch_bytes() {
  static std::atomic<int64_t> bytes{read_prefetch_bytes()};
  return bytes;
}
std::atomic<int>& prefetch_locality() {
  static std::atomic<int> locality{read_prefetch_locality()};
  return locality;
}

std::atomic<int64_t>& panel_prefetch() {
  static std::atomic<int64_t> bytes{read_panel_prefetch_bytes()};
  return bytes;
}

int64_t gemv_prefetch_bytes() { return prefetch_bytes().load(std::memory_order_relaxed); }
int64_t panel_prefetch_bytes() { return panel_prefetch().load(std::memory_order_relaxed); }
int gemv_prefetch_locality() { return prefetch_locality().load(std::memory_order_relaxed); }

std::atomic<int64_t>& interleaved_rows() {
  static std::atomic<int64_t> rows{read_interleaved_min_rows()};
  return rows;
}
int64_t interleaved_min_rows() { return interleaved_rows().load(std::memory_order_relaxed); }
void set_interleaved_min_rows(int64_t rows) {
  if (rows < 0) fail("set_interleaved_min_rows: ", rows, " rows (expected >= 0)");
  interleaved_rows() = rows;
}

void set_panel_prefetch_bytes(int64_t bytes) {
  if (bytes < 0) fail("set_panel_prefetch_bytes: ", bytes, " (expected >= 0)");
  panel_prefetch() = bytes;
}

void set_gemv_prefetch(int64_t bytes, int locality) {
  if (bytes < 0 || locality < 0 || locality > 3)
    fail("set_gemv_prefetch: bytes ", bytes, " (expected >= 0), locality ", locality,
         " (expected 0..3)");
  prefetch_bytes() = bytes;
  prefetch_locality() = locality;
}

}  // namespace lockstep::kernels
