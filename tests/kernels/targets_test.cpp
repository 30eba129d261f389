// Which Highway targets this build compiled and this CPU can run, best first (the first is the
// one HWY_DYNAMIC_DISPATCH picks). Printed so that a run on another machine or emulated CPU
// (scripts/test-arm64.sh under qemu-aarch64) records which targets the kernel tests forced.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "hwy/highway.h"
#include "hwy/targets.h"
#include "test_util.h"

namespace {

TEST(Targets, ListsTheTargetsTheKernelTestsForce) {
  std::string names;
  for (int64_t target : hwy::SupportedAndGeneratedTargets())
    names += std::string(names.empty() ? "" : " ") + hwy::TargetName(target);
  std::printf("hwy targets (best first): %s\n", names.c_str());
  // x86: a SIMD target and the scalar fallback at least; aarch64: NEON at least.
  EXPECT_GE(static_cast<int>(hwy::SupportedAndGeneratedTargets().size()),
            lockstep::test::kMinTargets)
      << names;
}

}  // namespace
