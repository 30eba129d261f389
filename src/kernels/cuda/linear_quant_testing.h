// Tests and benchmarks only: the M <= 16 configs of the quantized skinny linear
// (linear_quant_skinny.cuh). Any config gives the same bits (that is what tests check).
#pragma once

#include <string>

namespace lockstep::kernels::cuda::testing {
// 0 = the rule picks (default; the environment variable LOCKSTEP_QUANT_CFG=c, read once, forces c
// where nothing was set here); c in 1..n forces config c where its shared memory fits (else the
// rule's fallbacks). Returns n.
int set_linear_quant_config(int config);
// The M <= 16 config that the last quantized linear ran (0: none: M > 16 or the scratch copy).
int linear_quant_config_used();
std::string linear_quant_config_name(int config);
}  // namespace lockstep::kernels::cuda::testing
