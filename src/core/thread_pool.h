// A persistent pool of worker threads. parallel_for splits [0, n) into contiguous chunks that the
// caller and the workers claim one at a time. Kernels only ever split *independent outputs*
// across threads (output columns, heads, rows), and each output is reduced entirely by one
// thread, so neither the thread count nor who ran which chunk can change a bit of any result
// (../shared/DESIGN.md, the invariance rule).
//
// Decode runs a few hundred parallel_for calls per token, each only tens of microseconds long, so
// the hand-off latency matters as much as the kernels: workers spin for a short while after each
// job (a new one usually follows within microseconds) and only then sleep on a futex. Chunks are
// claimed, not assigned, so on a machine shared with other work a descheduled worker only delays
// the job by the chunk it holds, never by a share it has not started.
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

  // Claims and runs chunks of the current job until none is left.
  void run_chunks();

  std::vector<std::thread> workers_;
  // The job: written by the caller before it publishes a new claim word, read by a thread only
  // after its claim succeeded (the job cannot end, so cannot be replaced, while a chunk is out).
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_grain_ = 1;
  // Claim word: job serial (24 bits) | chunk count (20 bits) | next chunk (20 bits). A claim is a
  // compare-exchange of the whole word, so a thread holding a stale word can never claim a chunk
  // of a later job.
  std::mutex caller_mu_;  // serialises concurrent callers (see parallel_for)
  alignas(64) std::atomic<uint64_t> claim_{0};
  alignas(64) std::atomic<int64_t> done_{0};        // chunks of the current job finished
  alignas(64) std::atomic<uint32_t> generation_{0};  // bumped per job; workers wait on it
  alignas(64) std::atomic<int> sleeping_{0};         // workers blocked in generation_.wait
  std::atomic<bool> stop_{false};
  uint64_t serial_ = 0;
};

// Number of hardware threads the process may use (respects the CPU affinity mask).
int available_cores();

}  // namespace lockstep
