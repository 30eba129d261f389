#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>

namespace lockstep {

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = available_cores();
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
// Range of part `p` of `parts` over n items in units of grain.
void part_range(int64_t n, int64_t grain, int parts, int p, int64_t* b, int64_t* e) {
  const int64_t units = (n + grain - 1) / grain;
  const int64_t per = units / parts, extra = units % parts;
  const int64_t ub = p * per + std::min<int64_t>(p, extra);
  const int64_t ue = ub + per + (p < extra ? 1 : 0);
  *b = std::min(n, ub * grain);
  *e = std::min(n, ue * grain);
}
}  // namespace

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (n + grain - 1) / grain;
  const int parts = static_cast<int>(std::min<int64_t>(size(), units));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_grain_ = grain;
    job_parts_ = parts;
    pending_ = parts - 1;
    ++generation_;
  }
  wake_.notify_all();
  int64_t b, e;
  part_range(n, grain, parts, 0, &b, &e);
  fn(b, e);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n, grain;
    int parts;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      grain = job_grain_;
      parts = job_parts_;
    }
    if (index < parts) {
      int64_t b, e;
      part_range(n, grain, parts, index, &b, &e);
      (*job)(b, e);
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

namespace {
std::atomic<int> g_default_threads{0};
}

void ThreadPool::set_default_threads(int threads) { g_default_threads = threads; }

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(g_default_threads.load());
  return pool;
}

}  // namespace lockstep
