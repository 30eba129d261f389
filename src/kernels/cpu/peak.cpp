// Peak read bandwidth and FMA throughput (kernels/peak.h), compiled per Highway target and
// dispatched like linear(), so the FMA peak is that of the target linear() itself runs.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/peak.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace lockstep::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sums n floats with 8 independent vector accumulators (a read stream like a GEMV's), asking for
// each line `ahead` bytes on as the decode kernels do (cpu_tuning.h; t2 where `t2`, else nta).
float SumFloats(const float* p, size_t n, size_t ahead, bool t2) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  size_t i = 0;
  const auto* bytes = reinterpret_cast<const char*>(p);
  for (; i + 8 * L <= n; i += 8 * L) {
    if (ahead > 0) {
      for (size_t b = 0; b < 8 * L * sizeof(float); b += 64) {
        if (t2)
          __builtin_prefetch(bytes + i * sizeof(float) + ahead + b, 0, 1);
        else
          __builtin_prefetch(bytes + i * sizeof(float) + ahead + b, 0, 0);
      }
    }
    a0 = hn::Add(a0, hn::LoadU(d, p + i));
    a1 = hn::Add(a1, hn::LoadU(d, p + i + L));
    a2 = hn::Add(a2, hn::LoadU(d, p + i + 2 * L));
    a3 = hn::Add(a3, hn::LoadU(d, p + i + 3 * L));
    a4 = hn::Add(a4, hn::LoadU(d, p + i + 4 * L));
    a5 = hn::Add(a5, hn::LoadU(d, p + i + 5 * L));
    a6 = hn::Add(a6, hn::LoadU(d, p + i + 6 * L));
    a7 = hn::Add(a7, hn::LoadU(d, p + i + 7 * L));
  }
  a0 = hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)));
  float s = hn::GetLane(hn::SumOfLanes(d, a0));
  for (; i < n; ++i) s += p[i];
  return s;
}

// Runs `iters` rounds of 16 independent FMA chains (enough to cover FMA latency x ports on
// current cores); returns a value that depends on all of them so nothing is optimised away.
// Returns the FLOPs done through *flops.
float FmaLoop(size_t iters, double* flops) {
  const hn::ScalableTag<float> d;
  const auto m = hn::Set(d, 0.999999f), c = hn::Set(d, 1e-7f);
  // Distinct starting values: identical chains would be merged by the compiler into one.
  auto a0 = hn::Set(d, 1.00f), a1 = hn::Set(d, 1.01f), a2 = hn::Set(d, 1.02f);
  auto a3 = hn::Set(d, 1.03f), a4 = hn::Set(d, 1.04f), a5 = hn::Set(d, 1.05f);
  auto a6 = hn::Set(d, 1.06f), a7 = hn::Set(d, 1.07f), a8 = hn::Set(d, 1.08f);
  auto a9 = hn::Set(d, 1.09f), a10 = hn::Set(d, 1.10f), a11 = hn::Set(d, 1.11f);
  auto a12 = hn::Set(d, 1.12f), a13 = hn::Set(d, 1.13f), a14 = hn::Set(d, 1.14f);
  auto a15 = hn::Set(d, 1.15f);
  for (size_t i = 0; i < iters; ++i) {
    a0 = hn::MulAdd(a0, m, c);
    a1 = hn::MulAdd(a1, m, c);
    a2 = hn::MulAdd(a2, m, c);
    a3 = hn::MulAdd(a3, m, c);
    a4 = hn::MulAdd(a4, m, c);
    a5 = hn::MulAdd(a5, m, c);
    a6 = hn::MulAdd(a6, m, c);
    a7 = hn::MulAdd(a7, m, c);
    a8 = hn::MulAdd(a8, m, c);
    a9 = hn::MulAdd(a9, m, c);
    a10 = hn::MulAdd(a10, m, c);
    a11 = hn::MulAdd(a11, m, c);
    a12 = hn::MulAdd(a12, m, c);
    a13 = hn::MulAdd(a13, m, c);
    a14 = hn::MulAdd(a14, m, c);
    a15 = hn::MulAdd(a15, m, c);
  }
  *flops = 2.0 * 16 * static_cast<double>(hn::Lanes(d)) * static_cast<double>(iters);
  auto s = hn::Add(hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)),
                           hn::Add(hn::Add(a4, a5), hn::Add(a6, a7))),
                   hn::Add(hn::Add(hn::Add(a8, a9), hn::Add(a10, a11)),
                           hn::Add(hn::Add(a12, a13), hn::Add(a14, a15))));
  return hn::GetLane(hn::SumOfLanes(d, s));
}

}  // namespace lockstep::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "kernels/cpu/cpu_tuning.h"
#include "kernels/peak.h"

namespace lockstep::kernels {
HWY_EXPORT(SumFloats);
HWY_EXPORT(FmaLoop);

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

ReadSeries measure_read_gbps(ThreadPool& pool, size_t bytes, int reps) {
  const size_t n = bytes / sizeof(float);
  // Huge pages where the kernel gives them, like the CPU's weight panels (PanelArena).
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t size = (n * sizeof(float) + kHuge - 1) / kHuge * kHuge;
  void* map = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) fail("bench --machine: cannot allocate ", size, " bytes");
  float* buf = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(map) + kHuge - 1) / kHuge * kHuge);
  madvise(buf, size, MADV_HUGEPAGE);
  const size_t ahead = static_cast<size_t>(gemv_prefetch_bytes());
  const bool t2 = gemv_prefetch_locality() != 0;
  pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<float>(i & 1023);  // fault pages in
  }, 4096);
  ReadSeries out;
  std::atomic<float> sink{0};
  const auto read = [&](size_t distance, std::vector<double>& series) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e) {
      sink = sink + HWY_DYNAMIC_DISPATCH(SumFloats)(buf + b, static_cast<size_t>(e - b),
                                                    distance, t2);
    }, 4096);
    series.push_back(static_cast<double>(n * sizeof(float)) / seconds_since(t0) / 1e9);
  };
  for (int r = 0; r < reps; ++r) {
    read(ahead, out.gemv_prefetch);
    if (ahead > 0) read(0, out.no_prefetch);
  }
  munmap(map, size + kHuge);
  return out;
}

std::vector<double> measure_fma_gflops(ThreadPool& pool, int reps) {
  constexpr size_t kIters = 20'000'000;  // ~0.1 s per rep at AVX-512 speeds
  std::vector<double> out;
  std::atomic<float> sink{0};
  for (int r = 0; r < reps; ++r) {
    std::atomic<double> flops{0};
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(pool.size(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        double f = 0;
        sink = sink + HWY_DYNAMIC_DISPATCH(FmaLoop)(kIters, &f);
        flops = flops + f;
      }
    });
    out.push_back(flops / seconds_since(t0) / 1e9);
  }
  return out;
}

}  // namespace lockstep::kernels
#endif
