// What the GPU this process runs on can do, read once: the launch choices that depend on the
// device (shared memory per block, the wgmma kernel, programmatic dependent launch) all ask here,
// and none of them depends on the batch. Every choice gives the same bits (the kernels' variants
// differ in tiling and pipelining only), so a result is the same on every supported GPU.
//
// LOCKSTEP_CUDA_AS_CC=8.6 (8.0, 8.9, 12.0, ...) makes the launches those of an older device: its
// shared-memory limit, no wgmma, no PDL. With device code compiled for 8.x
// (-DLOCKSTEP_CUDA_GENCODE=arch=compute_80,code=sm_90) a Hopper then runs exactly what an A100 or an
// RTX 4090 runs, which is how the non-Hopper paths are tested on the H200 (tools/cuda/README.md).
#pragma once

#include <string>

namespace lockstep::kernels::cuda {

struct DeviceCaps {
  int device_cc = 0;   // the device's compute capability, major * 10 + minor
  int cc = 0;          // the one launches are chosen for: device_cc, or LOCKSTEP_CUDA_AS_CC's
  int code_arch = 0;   // the architecture the loaded device code was compiled for (80, 90, 120)
  int smem_optin = 0;  // bytes of dynamic shared memory one block may opt in to
  int sm_count = 1;
  bool wgmma = false;  // the sm_90a wgmma kernel may run (cc 9.0 and not LOCKSTEP_CUDA_WGMMA=0)
  bool pdl = false;    // programmatic dependent launch: cc >= 9.0 and device code that waits
  std::string name;    // the device's name
};

// Reads the device (and LOCKSTEP_CUDA_AS_CC) on first use; throws with the compute capability and
// the architectures this build has code for when the device cannot run this build.
const DeviceCaps& device_caps();

// The architectures this build carries device code for, as configured (e.g. "sm_80 sm_90 sm_120,
// PTX compute_80").
const char* built_for();

}  // namespace lockstep::kernels::cuda
