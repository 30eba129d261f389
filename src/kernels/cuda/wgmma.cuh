// Private PTX wrappers for the Hopper (sm_90a) linear kernel: wgmma shared-memory descriptors and
// group control, mbarriers, and the bulk tensor copy (TMA). The wgmma shapes themselves are in
// wgmma_ops.cuh (generated). Each wrapper compiles to a trap on other targets, so files built for
// plain sm_90 still link; the one that uses them is built for sm_90a only.
#pragma once
#include <cstdint>

#include "kernels/cuda/wgmma_ops.cuh"

namespace lockstep::kernels::cuda::detail {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LOCKSTEP_SM90A(...) __VA_ARGS__
#else
#define LOCKSTEP_SM90A(...) __trap()
#endif

// Descriptor of a K-major bf16 tile in shared memory whose rows are 128 bytes (64 k), stored with
// the 128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r % 8), atoms of 8 rows = 1024 B,
// 1024-byte aligned): what TMA writes with CU_TENSOR_MAP_SWIZZLE_128B, and lin::swz(r, c, 128).
// Fields (PTX ISA, "matrix descriptor"): start address >> 4 in bits 0-13, leading byte offset >> 4
// in 16-29 (unused for swizzled K-major: 1), stride byte offset >> 4 in 32-45 (1024 B between
// 8-row groups), swizzle mode in 62-63 (1 = 128 B). The k16 step s of a 64-k row starts 32 s bytes
// in: the hardware applies the XOR to the final address, so adding 2 s to the start field selects
// that step.
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_addr) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (1ull << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() {
  LOCKSTEP_SM90A(asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"));
}
__device__ __forceinline__ void wgmma_commit() {
  LOCKSTEP_SM90A(asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"));
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  LOCKSTEP_SM90A(asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"));
}
// Keeps the compiler from moving accumulator reads/writes across the asynchronous MMAs.
template <int R>
__device__ __forceinline__ void wgmma_fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Ordinary shared-memory writes made visible to the async proxy (wgmma, TMA) before a barrier.
__device__ __forceinline__ void fence_proxy_async() {
  LOCKSTEP_SM90A(asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"));
}

// --- mbarrier -----------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  LOCKSTEP_SM90A(asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory"));
}
__device__ __forceinline__ void mbar_fence_init() {
  LOCKSTEP_SM90A(asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"));
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  LOCKSTEP_SM90A(asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory"));
}
// One arrival that also expects `bytes` of TMA data (complete_tx) before the phase completes.
__device__ __forceinline__ void mbar_arrive_tx(uint32_t bar, uint32_t bytes) {
  LOCKSTEP_SM90A(asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                              : "memory"));
}
// Spins until the barrier's phase with parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  LOCKSTEP_SM90A(asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory"));
}

// --- TMA ----------------------------------------------------------------------------------------
// 2-D box of the tensor map `map` (a __grid_constant__ parameter) at (c0 = k, c1 = row) into
// shared memory at dst; completes `bar`'s transaction count. Rows or k outside the tensor read 0.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1) {
  LOCKSTEP_SM90A(asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory"));
}
__device__ __forceinline__ void tma_prefetch_desc(const void* map) {
  LOCKSTEP_SM90A(asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory"));
}

// Register budget of the calling warpgroup (the kernel must have a register cap at entry).
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  LOCKSTEP_SM90A(asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  LOCKSTEP_SM90A(asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)));
}

}  // namespace lockstep::kernels::cuda::detail
