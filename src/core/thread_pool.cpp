#include "core/thread_pool.h"

#include <mutex>

#include <sched.h>

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LOCKSTEP_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define LOCKSTEP_PAUSE() __asm__ __volatile__("yield")  // Arm's spin-wait hint, as pause on x86
#else
#define LOCKSTEP_PAUSE() std::this_thread::yield()
#endif

namespace lockstep {

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {
// How long an idle worker spins before sleeping. Between the ops of one decode step the gap is a
// few microseconds (norms, residual adds run on the caller); between tokens it is the sampler.
// A futex wake costs tens of microseconds on a VM, so spinning through those gaps pays; idle
// workers still go to sleep after this, so a pool that is not used costs nothing.
// Spinners call sched_yield every few pauses: on a machine shared with other work, a spinning
// thread may sit on the core that the thread it waits for needs, and yielding hands it over.
constexpr auto kSpin = std::chrono::microseconds(200);
constexpr int kPausesPerYield = 32;

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

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = available_cores();
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
constexpr int kIndexBits = 20;
constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
// Chunks per thread: enough that a descheduled worker holds up little, few enough that claiming
// (one compare-exchange) stays negligible next to a chunk's work.
constexpr int64_t kChunksPerThread = 4;
}  // namespace

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (n + grain - 1) / grain;
  if (size() == 1 || units == 1) {
    fn(0, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(units, kChunksPerThread * size());
  // One job at a time: two threads (the serving engine and a test's or CLI's model, say) may
  // share a pool; the second waits here instead of overwriting the first one's job.
  std::lock_guard<std::mutex> caller(caller_mu_);
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  done_.store(0, std::memory_order_relaxed);
  serial_ = (serial_ + 1) & ((uint64_t{1} << (64 - 2 * kIndexBits)) - 1);
  claim_.store((serial_ << (2 * kIndexBits)) | (static_cast<uint64_t>(chunks) << kIndexBits),
               std::memory_order_release);
  // seq_cst store then seq_cst load of sleeping_: either we see a worker that is about to sleep
  // and wake it, or that worker's own check sees the new generation (worker_loop).
  generation_.fetch_add(1);
  if (sleeping_.load() > 0) generation_.notify_all();
  run_chunks();
  for (int spins = 1; done_.load(std::memory_order_acquire) != chunks; ++spins) {
    LOCKSTEP_PAUSE();
    if (spins % kPausesPerYield == 0) sched_yield();
  }
  job_ = nullptr;
}

void ThreadPool::run_chunks() {
  for (;;) {
    uint64_t word = claim_.load(std::memory_order_acquire);
    const int64_t next = static_cast<int64_t>(word & kIndexMask);
    const int64_t chunks = static_cast<int64_t>((word >> kIndexBits) & kIndexMask);
    if (next >= chunks) return;
    if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel)) continue;
    int64_t b, e;
    part_range(job_n_, job_grain_, static_cast<int>(chunks), static_cast<int>(next), &b, &e);
    if (b < e) (*job_)(b, e);
    done_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadPool::worker_loop(int /*index*/) {
  // Generation 0 is the state at construction, before any job: a worker that starts late still
  // sees the first job as new.
  uint32_t seen = 0;
  for (;;) {
    // Spin for a new generation, then sleep on it.
    uint32_t now = generation_.load(std::memory_order_acquire);
    if (now == seen) {
      const auto until = std::chrono::steady_clock::now() + kSpin;
      for (int i = 0; (now = generation_.load(std::memory_order_acquire)) == seen; ++i) {
        LOCKSTEP_PAUSE();
        if (i % kPausesPerYield == kPausesPerYield - 1) sched_yield();
        if ((i & 255) == 255 && std::chrono::steady_clock::now() > until) {
          sleeping_.fetch_add(1);
          generation_.wait(seen);  // returns at once if generation_ already moved
          sleeping_.fetch_sub(1);
        }
      }
    }
    seen = now;
    if (stop_.load()) return;
    run_chunks();
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
