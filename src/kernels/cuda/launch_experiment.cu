// Launch-cost experiments (timing only): how much of a recorded decode step one class of kernels
// costs *inside* the graph, where the PDL overlap and the chain of waits are part of the cost and
// ncu, which times kernels one at a time with the caches flushed, cannot say. The method is
// H200.md's: time variants that leave a stage out or do it twice, and take differences.
//   LOCKSTEP_CUDA_TIMING_SKIP=p1,p2,...   launches whose name begins with a prefix are not made
//   LOCKSTEP_CUDA_TIMING_TWICE=p1,p2,...  they are made twice, back to back
// Names are detail::launch's `what` ("rms_norm_kernel", "linear_experts (skinny kernel)", ...).
// Either makes the output something other than the model's: a warning says so on the first
// affected launch. Unset (the default), a launch is made once and nothing else changes.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/common.cuh"

namespace lockstep::kernels::cuda::detail {
namespace {

std::vector<std::string> prefixes(const char* var) {
  std::vector<std::string> out;
  const char* v = std::getenv(var);
  if (!v) return out;
  std::string s(v);
  size_t at = 0;
  while (at <= s.size()) {
    const size_t end = std::min(s.find(',', at), s.size());
    if (end > at) out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

bool matches(const std::vector<std::string>& ps, const char* what) {
  for (const std::string& p : ps)
    if (std::strncmp(what, p.c_str(), p.size()) == 0) return true;
  return false;
}

}  // namespace

int launch_repeats(const char* what) {
  static const std::vector<std::string> skip = prefixes("LOCKSTEP_CUDA_TIMING_SKIP");
  static const std::vector<std::string> twice = prefixes("LOCKSTEP_CUDA_TIMING_TWICE");
  if (skip.empty() && twice.empty()) return 1;
  const int n = matches(skip, what) ? 0 : matches(twice, what) ? 2 : 1;
  static bool warned = false;
  if (n != 1 && !warned) {
    warned = true;
    std::fprintf(stderr,
                 "lockstep: LOCKSTEP_CUDA_TIMING_SKIP / _TWICE leave out or double kernels "
                 "(first: %s): the output is not the model's, for timing experiments only\n",
                 what);
  }
  return n;
}

}  // namespace lockstep::kernels::cuda::detail
