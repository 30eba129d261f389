// Private helpers shared by the CUDA kernel files: the library's one stream, error checks, launch
// checks, a grow-only device scratch buffer, and the device transcendentals (ports of
// kernels/math.h with explicit FMAs, so GPU exp/silu/sigmoid give the CPU's bits).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/error.h"
#include "kernels/cuda/device_caps.h"

namespace lockstep::kernels::cuda::detail {

// The stream every op is enqueued on (created on first use).
cudaStream_t stream();

// Throws lockstep::Error("CUDA <what>: <CUDA's message>") when e is an error.
void check(cudaError_t e, const char* what);
// After a launch: throws when the launch failed (bad configuration, no device, ...).
void check_launch(const char* kernel);

// Device scratch of at least `bytes`, owned by the library, slot `slot` (each op uses its own slot
// so two scratch arrays can be live at once). Grow-only; growing waits for the stream first.
// zeroed: a new allocation is zeroed (counters whose users put them back to zero after use).
void* scratch(int slot, size_t bytes, bool zeroed = false);

// Kernel variants for less shared memory per block than Hopper's 227 KiB (the 99 KiB of sm_86 /
// sm_89 / sm_120, the 163 KiB of sm_80) are compiled into device code for every architecture but
// sm_90: only Hopper runs sm_90 code and it never picks them (device_caps.h), so there a variant's
// body is left out (it traps), which keeps the compile time of an sm_90-only build.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
constexpr bool kSmallSmemCode = false;
#else
constexpr bool kSmallSmemCode = true;
#endif

// --- programmatic dependent launch (PDL) -------------------------------------------------------
// Kernels are launched with cudaLaunchAttributeProgrammaticStreamSerialization (kept by stream
// capture as programmatic graph edges), so a kernel's blocks may become resident, and run the part
// before pdl_wait(), while the kernel before it in the stream is still finishing. The rule every
// kernel here keeps: before pdl_wait() it reads nothing but weights (never written by a kernel)
// and writes nothing outside its own shared memory; everything else comes after. (A prefetch
// reads no value: the decode attention prefetches the step's uploaded tables into L1 before it.) pdl_wait()
// returns once the previous kernel has completed and its writes are visible; since that kernel
// itself waited for its own predecessor before completing, the order is transitive. PDL changes
// scheduling only, never arithmetic. Off with LOCKSTEP_CUDA_PDL=0 (or testing::set_pdl).
//
// The attribute is set only when the op enqueued just before was one of these kernels: copies,
// memsets, events, graph launches, cuBLAS and plain launches call note_stream_op(), so the
// kernel after them is launched plainly and waits for them in full.
bool pdl_enabled();
void note_stream_op();
bool pdl_next_launch();  // true: this launch gets the attribute (and the next kernel may too)

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// bar.sync / bar.arrive on named barrier `id` (1..8) over N threads. PTX names the barrier by an
// immediate here, so that a kernel holds only the barriers it uses: a switch, which folds to the
// one instruction wherever id is known after inlining.
#define LOCKSTEP_NAMED_BAR(op, i) \
  case i: asm volatile(op " " #i ", %0;\n" ::"n"(N) : "memory"); break;
#define LOCKSTEP_NAMED_BARS(op)                                                           \
  LOCKSTEP_NAMED_BAR(op, 1) LOCKSTEP_NAMED_BAR(op, 2) LOCKSTEP_NAMED_BAR(op, 3)           \
  LOCKSTEP_NAMED_BAR(op, 4) LOCKSTEP_NAMED_BAR(op, 5) LOCKSTEP_NAMED_BAR(op, 6)           \
  LOCKSTEP_NAMED_BAR(op, 7) LOCKSTEP_NAMED_BAR(op, 8)
template <int N>
__device__ __forceinline__ void named_bar_sync(int id) {
  switch (id) { LOCKSTEP_NAMED_BARS("bar.sync") }
}
template <int N>
__device__ __forceinline__ void named_bar_arrive(int id) {
  switch (id) { LOCKSTEP_NAMED_BARS("bar.arrive") }
}
#undef LOCKSTEP_NAMED_BARS
#undef LOCKSTEP_NAMED_BAR

// How many times a launch named `what` is made: 1, or 0 / 2 under the timing experiments'
// LOCKSTEP_CUDA_TIMING_SKIP / _TWICE (launch_experiment.cu; the output is then not the model's).
int launch_repeats(const char* what);

// kernel<<<grid, block, smem, stream()>>>(args...), with the PDL attribute where pdl_next_launch()
// says so; throws naming `what` when the launch fails.
template <typename... P, typename... A>
void launch(const char* what, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
            A&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream();
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  const int repeats = launch_repeats(what);
  for (int r = 0; r < repeats; ++r) {
    cfg.numAttrs = pdl_next_launch() ? 1 : 0;
    check(cudaLaunchKernelEx(&cfg, kernel, args...), what);
  }
}

inline unsigned blocks_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

// The core of exp_f32 (and of the attention walk's branch-free form, exp_f32_select): r = x - n ln2
// in two parts, then the degree-7 Taylor polynomial of e^r, in exactly kernels::exp_f32's order.
__device__ __forceinline__ float exp_poly_f32(float x, float n) {
  float r = __fmaf_rn(n, -0.693145751953125f, x);
  r = __fmaf_rn(n, -1.428606765330187045e-06f, r);
  float p = 1.0f / 5040.0f;
  p = __fmaf_rn(p, r, 1.0f / 720.0f);
  p = __fmaf_rn(p, r, 1.0f / 120.0f);
  p = __fmaf_rn(p, r, 1.0f / 24.0f);
  p = __fmaf_rn(p, r, 1.0f / 6.0f);
  p = __fmaf_rn(p, r, 0.5f);
  p = __fmaf_rn(p, r, 1.0f);
  return __fmaf_rn(p, r, 1.0f);
}

// e^x, the same algorithm and operation order as kernels::exp_f32 (math.h).
__device__ __forceinline__ float exp_f32(float x) {
  if (isnan(x)) return x;
  if (x > 88.72283935546875f) return __int_as_float(0x7f800000);
  if (x < -103.97208f) return 0.0f;
  const float n = rintf(__fmul_rn(x, 1.44269504088896341f));
  const float p = exp_poly_f32(x, n);
  const int e = static_cast<int>(n);
  const int e1 = e / 2, e2 = e - e1;
  return __fmul_rn(__fmul_rn(p, __int_as_float((e1 + 127) << 23)), __int_as_float((e2 + 127) << 23));
}
// ln(x), the algorithm and operation order of kernels::log_f32 (math.h).
__device__ __forceinline__ float log_f32(float x) {
  if (isnan(x) || x < 0.0f) return __int_as_float(0x7fc00000);
  if (x == 0.0f) return __int_as_float(static_cast<int>(0xff800000u));
  if (isinf(x)) return x;
  int e = 0;
  if (x < 1.17549435e-38f) {
    x = __fmul_rn(x, 8388608.0f);
    e = -23;
  }
  const unsigned b = __float_as_uint(x);
  e += static_cast<int>(b >> 23) - 127;
  float m = __uint_as_float((b & 0x7fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m = __fmul_rn(m, 0.5f);
    ++e;
  }
  const float s = __fdiv_rn(__fsub_rn(m, 1.0f), __fadd_rn(m, 1.0f));
  const float s2 = __fmul_rn(s, s);
  float p = 2.0f / 11.0f;
  p = __fmaf_rn(p, s2, 2.0f / 9.0f);
  p = __fmaf_rn(p, s2, 2.0f / 7.0f);
  p = __fmaf_rn(p, s2, 2.0f / 5.0f);
  p = __fmaf_rn(p, s2, 2.0f / 3.0f);
  p = __fmaf_rn(p, s2, 2.0f);
  const float logm = __fmul_rn(p, s);
  const float fe = static_cast<float>(e);
  return __fmaf_rn(fe, 0.693145751953125f, __fmaf_rn(fe, 1.428606765330187045e-06f, logm));
}

__device__ __forceinline__ float sigmoid_f32(float x) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, exp_f32(-x)));
}
__device__ __forceinline__ float silu_f32(float x) {
  return __fdiv_rn(x, __fadd_rn(1.0f, exp_f32(-x)));
}
// kernels::gelu_tanh_f32 (math.h): z = x * fma(c2, x * x, c1), x / (1 + exp(-z)).
__device__ __forceinline__ float gelu_tanh_f32(float x) {
  const float z = __fmul_rn(x, __fmaf_rn(0.07135481627260025f, __fmul_rn(x, x), 1.5957691216057308f));
  return __fdiv_rn(x, __fadd_rn(1.0f, exp_f32(-z)));
}
// kernels::softcap_f32: cap * tanh(x / cap), tanh(|y|) = (1 - e) / (1 + e), e = exp(-2|y|).
__device__ __forceinline__ float softcap_f32(float x, float cap) {
  const float y = __fdiv_rn(x, cap);
  if (isnan(y)) return __fmul_rn(cap, y);
  const float e = exp_f32(__fmul_rn(-2.0f, fabsf(y)));
  const float t = __fdiv_rn(__fsub_rn(1.0f, e), __fadd_rn(1.0f, e));
  return __fmul_rn(cap, signbit(y) ? -t : t);
}

}  // namespace lockstep::kernels::cuda::detail
