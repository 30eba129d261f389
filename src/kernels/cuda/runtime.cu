// Device discovery, memory, copies and the one stream (cuda_ops.h).
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace lockstep::kernels::cuda {
namespace detail {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("CUDA ", what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

void check_launch(const char* kernel) {
  note_stream_op();  // a plain <<<>>> launch: the kernel after it waits for it in full
  check(cudaGetLastError(), kernel);
}

cudaStream_t stream() {
  static cudaStream_t s = [] {
    cudaStream_t created = nullptr;
    check(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking), "stream create");
    return created;
  }();
  return s;
}

std::atomic<uint64_t> scratch_reallocations{0};

// PDL (common.cuh): on unless LOCKSTEP_CUDA_PDL=0; testing::set_pdl overrides.
std::atomic<int> pdl_override{0};  // 0: the environment, 1: on, 2: off
std::atomic<bool> last_was_kernel{false};

bool pdl_enabled() {
  static const bool env_on = [] {
    const char* v = std::getenv("LOCKSTEP_CUDA_PDL");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  // Off wherever the device or the loaded code lacks it (device_caps.h), whatever is asked.
  if (!device_caps().pdl) return false;
  const int o = pdl_override.load();
  return o == 0 ? env_on : o == 1;
}
void note_stream_op() { last_was_kernel.store(false); }
bool pdl_next_launch() {
  const bool after_kernel = last_was_kernel.exchange(true);
  return after_kernel && pdl_enabled();
}

void* scratch(int slot, size_t bytes, bool zeroed) {
  static std::mutex mu;
  static std::vector<std::pair<void*, size_t>> slots;
  std::lock_guard<std::mutex> lock(mu);
  if (slot >= static_cast<int>(slots.size())) slots.resize(slot + 1, {nullptr, 0});
  auto& s = slots[slot];
  if (s.second < bytes) {
    // Kernels already enqueued may still use the old buffer.
    check(cudaStreamSynchronize(stream()), "synchronize (scratch grow)");
    if (s.first) check(cudaFree(s.first), "free (scratch grow)");
    scratch_reallocations.fetch_add(1);  // graphs recorded with the old buffer are stale
    s.first = nullptr;
    s.second = 0;
    const size_t want = bytes + bytes / 4;
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, want);
    if (e != cudaSuccess)
      fail("CUDA scratch allocation of ", want, " bytes failed: ", cudaGetErrorString(e));
    if (zeroed) check(cudaMemsetAsync(p, 0, want, stream()), "zero (scratch)");
    s = {p, want};
  }
  return s.first;
}

}  // namespace detail

using detail::check;

bool available(std::string* why_not) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why_not) *why_not = std::string("CUDA: ") + cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky-free error state
    return false;
  }
  if (n == 0) {
    if (why_not) *why_not = "CUDA: no device found";
    return false;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    if (why_not) *why_not = "CUDA: cannot read device 0's properties";
    cudaGetLastError();
    return false;
  }
  if (prop.major < 8) {
    if (why_not)
      *why_not = std::string("CUDA: device ") + prop.name + " has compute capability " +
                 std::to_string(prop.major) + "." + std::to_string(prop.minor) +
                 " (lockstep's BF16 tensor-core kernels need 8.0 or newer; this build has code for " +
                 built_for() + ")";
    return false;
  }
  return true;
}

std::string describe_device() {
  std::string why;
  if (!available(&why)) fail(why);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "get device properties");
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << prop.name << ", " << prop.multiProcessorCount << " SMs, "
      << static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0) << " GiB, cc "
      << prop.major << "." << prop.minor;
  const DeviceCaps& caps = device_caps();  // throws when this build has no code for the device
  if (caps.cc != caps.device_cc)
    out << " (launches as cc " << caps.cc / 10 << "." << caps.cc % 10 << ": LOCKSTEP_CUDA_AS_CC)";
  return out.str();
}

void* malloc_device(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (e != cudaSuccess)
    fail("CUDA allocation of ", bytes, " bytes failed: ", cudaGetErrorString(e));
  return p;
}

void free_device(void* p) {
  if (p) check(cudaFree(p), "free");
}

void upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  detail::note_stream_op();
  check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, detail::stream()), "upload");
}

void download(void* host_dst, const void* src, size_t bytes) {
  detail::note_stream_op();
  if (bytes != 0)
    check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, detail::stream()),
          "download");
  check(cudaStreamSynchronize(detail::stream()), "download (synchronize)");
}

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  detail::note_stream_op();
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, detail::stream()), "copy");
}

void fill_zero(void* dst, size_t bytes) {
  if (bytes == 0) return;
  detail::note_stream_op();
  check(cudaMemsetAsync(dst, 0, bytes, detail::stream()), "fill_zero");
}

uint64_t scratch_generation() { return detail::scratch_reallocations.load(); }

// --- per-op timing ------------------------------------------------------------------------------
void* event_create() {
  cudaEvent_t e = nullptr;
  check(cudaEventCreate(&e), "event create");
  return e;
}

void event_destroy(void* e) {
  if (e) cudaEventDestroy(static_cast<cudaEvent_t>(e));
}

void event_record(void* e) {
  detail::note_stream_op();
  check(cudaEventRecord(static_cast<cudaEvent_t>(e), detail::stream()), "event record");
}

float event_elapsed_ms(void* start, void* end) {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(end)), "event synchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)),
        "event elapsed time");
  return ms;
}

uint32_t* hold_flag_create(const uint32_t** device_flag) {
  void* p = nullptr;
  check(cudaHostAlloc(&p, 64, cudaHostAllocMapped), "pinned flag allocation");
  *static_cast<volatile uint32_t*>(p) = 0;
  void* d = nullptr;
  check(cudaHostGetDevicePointer(&d, p, 0), "pinned flag device address");
  *device_flag = static_cast<const uint32_t*>(d);
  return static_cast<uint32_t*>(p);
}

void hold_flag_destroy(uint32_t* host_flag) {
  if (host_flag) cudaFreeHost(host_flag);
}

namespace {
__global__ void hold_kernel(const volatile uint32_t* flag, uint32_t ticket, uint64_t timeout_ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (static_cast<int32_t>(*flag - ticket) < 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > timeout_ns) break;
    __nanosleep(500);
  }
}
}  // namespace

void hold_stream(const uint32_t* device_flag, uint32_t ticket, double timeout_ms) {
  hold_kernel<<<1, 1, 0, detail::stream()>>>(device_flag, ticket,
                                             static_cast<uint64_t>(timeout_ms * 1e6));
  detail::check_launch("profile hold");
}

namespace testing {
void set_pdl(int mode) { detail::pdl_override.store(mode); }
}  // namespace testing

void synchronize() { check(cudaStreamSynchronize(detail::stream()), "synchronize"); }

}  // namespace lockstep::kernels::cuda
