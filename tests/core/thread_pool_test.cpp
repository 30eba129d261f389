// The pool hands out every index exactly once, for any size, grain and thread count, over many
// back-to-back jobs (the spinning hand-off must never lose or repeat a job), and pools can be
// created and destroyed at once (a worker that starts late must still see the first job).
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace lockstep {
namespace {

TEST(ThreadPool, EveryIndexOnceOverManyJobs) {
  for (int threads = 1; threads <= 4; ++threads) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(1000);
    for (int job = 0; job < 2000; ++job) {
      const int64_t n = job % 97, grain = 1 + job % 5;
      for (int64_t i = 0; i < n; ++i) hits[i] = 0;
      pool.parallel_for(
          n,
          [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
          },
          grain);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << job;
    }
  }
}

TEST(ThreadPool, CreateUseDestroyAtOnce) {
  for (int round = 0; round < 200; ++round) {
    ThreadPool pool(2 + round % 3);
    std::atomic<int64_t> sum{0};
    pool.parallel_for(64, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
    ASSERT_EQ(sum.load(), 64 * 63 / 2);
  }
}

}  // namespace
}  // namespace lockstep
