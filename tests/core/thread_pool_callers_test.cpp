// Two threads may share one pool (the serving engine's thread and another model user): their
// jobs must not interleave. Each caller sums its own ranges; any lost or foreign range shows.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/thread_pool.h"

namespace lockstep {
namespace {

TEST(ThreadPoolCallers, ConcurrentCallersGetTheirOwnJobs) {
  ThreadPool pool(2);
  auto caller = [&](int64_t n, int64_t* bad) {
    for (int rep = 0; rep < 2000; ++rep) {
      std::atomic<int64_t> covered{0};
      pool.parallel_for(n, [&](int64_t b, int64_t e) { covered += e - b; });
      if (covered != n) ++*bad;
    }
  };
  int64_t bad1 = 0, bad2 = 0;
  std::thread a(caller, 1000, &bad1), b(caller, 777, &bad2);
  a.join();
  b.join();
  EXPECT_EQ(bad1, 0);
  EXPECT_EQ(bad2, 0);
}

}  // namespace
}  // namespace lockstep
