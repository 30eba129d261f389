// device_caps(): the device's properties and the code loaded for it (device_caps.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_caps.h"

#ifndef LOCKSTEP_CUDA_BUILT_FOR
#define LOCKSTEP_CUDA_BUILT_FOR "(unknown)"
#endif

namespace lockstep::kernels::cuda {
namespace {

// A kernel whose attributes say which code the driver loaded for this device.
__global__ void probe_kernel() {}

// The opt-in shared memory per block of each compute capability (CUDA programming guide,
// "Technical Specifications per Compute Capability"); 0 for one not listed.
int smem_optin_of(int cc) {
  switch (cc) {
    case 80: case 87: return 163 * 1024;
    case 86: case 89: case 120: case 121: return 99 * 1024;
    case 90: case 100: case 103: return 227 * 1024;
    default: return 0;
  }
}

std::string cc_text(int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); }

// LOCKSTEP_CUDA_AS_CC as major * 10 + minor ("8.6" or "86"); 0 when unset.
int as_cc_from_env() {
  const char* v = std::getenv("LOCKSTEP_CUDA_AS_CC");
  if (!v || !*v) return 0;
  const std::string s(v);
  int cc = 0;
  const size_t dot = s.find('.');
  try {
    cc = dot == std::string::npos ? std::stoi(s) : std::stoi(s.substr(0, dot)) * 10 + std::stoi(s.substr(dot + 1));
  } catch (const std::exception&) {
    cc = -1;
  }
  if (smem_optin_of(cc) == 0)
    fail("LOCKSTEP_CUDA_AS_CC=", s, ": expected a compute capability such as 8.0, 8.6, 8.9, 9.0 or 12.0");
  return cc;
}

DeviceCaps read_caps() {
  DeviceCaps c;
  int dev = 0;
  detail::check(cudaGetDevice(&dev), "get device");
  cudaDeviceProp prop{};
  detail::check(cudaGetDeviceProperties(&prop, dev), "get device properties");
  c.name = prop.name;
  c.device_cc = prop.major * 10 + prop.minor;
  c.sm_count = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
  c.smem_optin = static_cast<int>(prop.sharedMemPerBlockOptin);
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, probe_kernel);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("CUDA: this build has no code for ", prop.name, " (compute capability ", cc_text(c.device_cc),
         "; built for ", LOCKSTEP_CUDA_BUILT_FOR, "): rebuild with -DLOCKSTEP_CUDA_ARCHS=",
         c.device_cc, " (", cudaGetErrorString(e), ")");
  }
  c.code_arch = attr.ptxVersion;
  c.cc = c.device_cc;
  if (const int as = as_cc_from_env()) {
    if (as > c.device_cc)
      fail("LOCKSTEP_CUDA_AS_CC=", cc_text(as), " is newer than the device (", cc_text(c.device_cc),
           "); it can only make launches those of an older device");
    // The variants for a smaller shared memory are left out of sm_90 code, which only Hopper runs
    // (common.cuh, LOCKSTEP_SMALL_SMEM_CODE).
    if (as != c.device_cc && smem_optin_of(as) < c.smem_optin && c.code_arch == 90)
      fail("LOCKSTEP_CUDA_AS_CC=", cc_text(as), " needs device code compiled for that device's ",
           "architecture, and the loaded code is sm_90's: configure with ",
           "-DLOCKSTEP_CUDA_GENCODE=arch=compute_80,code=sm_", c.device_cc);
    c.cc = as;
    c.smem_optin = std::min(c.smem_optin, smem_optin_of(as));
  }
  const char* wg = std::getenv("LOCKSTEP_CUDA_WGMMA");
  c.wgmma = c.cc == 90 && c.device_cc == 90 && !(wg && std::strcmp(wg, "0") == 0);
  // griddepcontrol.wait is compiled into code for 9.0 and newer only (common.cuh): without it a
  // kernel launched early would read its predecessor's output before it is written.
  c.pdl = c.cc >= 90 && c.code_arch >= 90;
  return c;
}

}  // namespace

const DeviceCaps& device_caps() {
  static const DeviceCaps caps = read_caps();
  return caps;
}

const char* built_for() { return LOCKSTEP_CUDA_BUILT_FOR; }

}  // namespace lockstep::kernels::cuda
