// This machine's peaks, measured with lockstep's own SIMD code (lockstep bench --machine): the
// denominators that decode (bytes per token over read bandwidth) and prefill (FLOPs over FMA
// throughput) are reported against.
#pragma once

#include <cstddef>
#include <vector>

#include "core/thread_pool.h"

namespace lockstep::kernels {

// Sustained read bandwidth in GB/s, all pool threads each summing its share of a `bytes` buffer
// (far larger than the caches, ordinary 4 KiB pages like the weight mapping); one value per rep.
std::vector<double> measure_read_gbps(ThreadPool& pool, size_t bytes, int reps);

// float32 FMA throughput in GFLOP/s (an FMA is 2 FLOPs per lane), every pool thread running
// independent FMA chains in registers at the widest compiled target; one value per rep.
std::vector<double> measure_fma_gflops(ThreadPool& pool, int reps);

}  // namespace lockstep::kernels
