// Which Highway targets this build compiled and this CPU can run, best first (the first is the
// one HWY_DYNAMIC_DISPATCH picks). Printed so that a run on another machine or emulated CPU
// (scripts/test-arm64.sh under qemu-aarch64) records which targets the kernel tests forced.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "hwy/highway.h"
#include "hwy/targets.h"

namespace {

TEST(Targets, ListsTheTargetsTheKernelTestsForce) {
  std::string names;
  for (int64_t target : hwy::SupportedAndGeneratedTargets())
    names += std::string(names.empty() ? "" : " ") + hwy::TargetName(target);
  std::printf("hwy targets (best first): %s\n", names.c_str());
  // A SIMD target and the scalar fallback at least, on every CPU lockstep builds for.
  EXPECT_GE(hwy::SupportedAndGeneratedTargets().size(), 2u) << names;
}

}  // namespace
