// This machine's peaks, measured with lockstep's own SIMD code (lockstep bench --machine): the
// denominators that decode (bytes per token over read bandwidth) and prefill (FLOPs over FMA
// throughput) are reported against.
#pragma once

#include <cstddef>
#include <vector>

#include "core/thread_pool.h"

namespace lockstep::kernels {

// The measurement's version: figures cached by another (bench's machine.json) are measured again.
// 3: the faster of the GEMV's prefetch distance and none; 2: huge pages and the GEMV's prefetch
// distance; 1: 4 KiB pages, no prefetch.
inline constexpr int kPeakMethod = 3;

// Sustained read bandwidth in GB/s, all pool threads each summing its share of a `bytes` buffer
// (far larger than the caches) the way decode reads weights, huge pages where the kernel gives
// them: one value per rep with each line asked for gemv_prefetch_bytes() ahead (cpu_tuning.h), and,
// in reps alternated with those, one without software prefetch (how panels read on Intel CPUs;
// empty where the GEMV asks for none, which is the same stream). bench --machine takes the faster.
struct ReadSeries {
  std::vector<double> gemv_prefetch, no_prefetch;
};
ReadSeries measure_read_gbps(ThreadPool& pool, size_t bytes, int reps);

// float32 FMA throughput in GFLOP/s (an FMA is 2 FLOPs per lane), every pool thread running
// independent FMA chains in registers at the widest compiled target; one value per rep.
std::vector<double> measure_fma_gflops(ThreadPool& pool, int reps);

}  // namespace lockstep::kernels
