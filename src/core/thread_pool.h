// A persistent pool of worker threads. parallel_for splits [0, n) into contiguous ranges, one per
// thread (the caller is thread 0). Kernels only ever split *independent outputs* across threads
// (output columns, heads, rows), and each output is reduced entirely by one thread, so the thread
// count can never change a bit of any result (../shared/DESIGN.md, the invariance rule).
//
// Decode runs a few hundred parallel_for calls per token, each only tens of microseconds long, so
// the hand-off latency matters as much as the kernels: workers spin for a short while after each
// job (a new one usually follows within microseconds) and only then sleep on a futex.
#pragma once

#include <atomic>
#include <mutex>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace lockstep {

class ThreadPool {
 public:
  // threads <= 0 means one per available core.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n), in parallel; returns when all are done.
  // Ranges are multiples of `grain` (except the last) so SIMD kernels get aligned chunks.
  // Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  // A process-wide pool; set_default_threads must be called before first use to change its size.
  static ThreadPool& global();
  static void set_default_threads(int threads);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  // The job: written by the caller before it publishes a new generation_, read by workers after
  // they observe it (release/acquire on generation_).
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_grain_ = 1;
  int job_parts_ = 0;
  alignas(64) std::atomic<uint32_t> generation_{0};
  std::mutex caller_mu_;                        // serialises concurrent callers
  alignas(64) std::atomic<int> pending_{0};    // workers that have not finished the current job
  alignas(64) std::atomic<int> sleeping_{0};   // workers blocked in generation_.wait
  std::atomic<bool> stop_{false};
};

// Number of hardware threads the process may use (respects the CPU affinity mask).
int available_cores();

}  // namespace lockstep
