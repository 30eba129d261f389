// Probe (issue #10): is a chain of wgmma.mma_async m64nNk16 BF16->FP32 steps bitwise the same as
// the chain of mma.sync.m16n8k16 steps the M <= 64 linear kernels run, over the same k-steps in the
// same order from an accumulator of +0? If so, the prefill linears may use wgmma and keep the
// invariance rule (a row's bits do not depend on M); if not, they may not.
// One warpgroup computes a 64 x N tile (64 "weight rows" = A, N "tokens" = B) over K both ways:
// (1) each warp runs mma.sync.m16n8k16 on fragments loaded from global memory, k-steps 0, 16, ...;
// (2) the warpgroup runs wgmma m64nNk16 with A and B in 128-byte-swizzled shared memory, the same
// k-steps in the same order. Every output bit is compared, for several data distributions (wide
// exponents with cancellation, values whose products are FP32 denormals, bf16 denormals, rounding
// ties), K up to 12288 and N from 8 to 256 (does the wgmma's N change anything?).
//   nvcc -std=c++20 -O2 --fmad=false -gencode=arch=compute_90a,code=sm_90a -Isrc \
//        tools/cuda/wgmma_probe.cu -o wgmma_probe && ./wgmma_probe
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/wgmma.cuh"

using namespace lockstep::kernels::cuda::detail;

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

// (1) mma.sync: warp w owns rows [16 w, 16 w + 16), all N tokens; w is [64][K], x is [N][K].
__global__ void chain_mma_sync(const uint16_t* w, const uint16_t* x, int N, int K, float* out) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const uint32_t* w32 = reinterpret_cast<const uint32_t*>(w);
  const uint32_t* x32 = reinterpret_cast<const uint32_t*>(x);
  const int r0 = 16 * warp + g;
  for (int j = 0; j < N / 8; ++j) {
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int tok = 8 * j + g;
    for (int k = 0; k < K; k += 16) {
      uint32_t a[4];
      a[0] = w32[(static_cast<int64_t>(r0) * K + k + 2 * t) / 2];
      a[1] = w32[(static_cast<int64_t>(r0 + 8) * K + k + 2 * t) / 2];
      a[2] = w32[(static_cast<int64_t>(r0) * K + k + 8 + 2 * t) / 2];
      a[3] = w32[(static_cast<int64_t>(r0 + 8) * K + k + 8 + 2 * t) / 2];
      const uint32_t b0 = x32[(static_cast<int64_t>(tok) * K + k + 2 * t) / 2];
      const uint32_t b1 = x32[(static_cast<int64_t>(tok) * K + k + 8 + 2 * t) / 2];
      mma_bf16_16816(c, a, b0, b1);
    }
    const int col = 8 * j + 2 * t;
    out[r0 * N + col] = c[0];
    out[r0 * N + col + 1] = c[1];
    out[(r0 + 8) * N + col] = c[2];
    out[(r0 + 8) * N + col + 1] = c[3];
  }
}

// (2) wgmma: 64 k per round staged into swizzled shared memory by plain stores, then 4 k16 steps.
template <int N>
__global__ void chain_wgmma(const uint16_t* w, const uint16_t* x, int K, float* out) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const uint32_t sa = smem_addr(smem), sb = sa + 64 * 128;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += 64) {
    __syncthreads();
    for (int idx = tid; idx < (64 + N) * 8; idx += 128) {
      const int r = idx >> 3, c = idx & 7;
      const uint16_t* src = r < 64 ? w + static_cast<int64_t>(r) * K + k0 + 8 * c
                                   : x + static_cast<int64_t>(r - 64) * K + k0 + 8 * c;
      const int rr = r < 64 ? r : r - 64;
      uint8_t* dst = smem + (r < 64 ? 0 : 64 * 128) + rr * 128 + ((c ^ (rr & 7)) << 4);
      // k past K (K = 16: one step of the 4) is zero-filled and never multiplied.
      *reinterpret_cast<uint4*>(dst) =
          k0 + 8 * c < K ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
    }
    fence_proxy_async();
    __syncthreads();
    wgmma_fence_regs(d);
    wgmma_fence();
    const int steps = min(4, (K - k0) / 16);
#pragma unroll
    for (int s = 0; s < 4; ++s)
      if (s < steps) Wgmma<N>::mma(d, wgmma_desc_sw128(sa + 32 * s), wgmma_desc_sw128(sb + 32 * s));
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_regs(d);
  }
#pragma unroll
  for (int r = 0; r < N / 2; ++r) {
    const int row = 16 * warp + g + 8 * ((r / 2) % 2), col = 8 * (r / 4) + 2 * t + r % 2;
    out[row * N + col] = d[r];
  }
}

namespace {
long g_far = 0;  // differing outputs that are not even close (layout bug, not rounding)

uint16_t bf(uint32_t sign, int exp_unbiased, uint32_t mant7) {  // normal bf16
  const int e = exp_unbiased + 127;
  return static_cast<uint16_t>((sign << 15) | (static_cast<uint32_t>(e) << 7) | (mant7 & 127));
}

// Data distributions (dist): 0 uniform-ish [-1, 1); 1 exponents in [-40, 40] (huge cancellation
// inside each 16-product group and across steps); 2 paired cancellation (w[k+1] = -w[k] nearly,
// x equal), plus a few large terms; 3 products in FP32's denormal range (exponents near -64) and
// bf16 denormals; 4 ties: few mantissa bits, exponents 0..24 so partial sums land on FP32 ties.
void fill(std::vector<uint16_t>& v, int rows, int K, int dist, std::mt19937& rng, bool is_x) {
  std::uniform_int_distribution<uint32_t> u32;
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < K; ++k) {
      uint32_t s = u32(rng) & 1, m = u32(rng) & 127;
      uint16_t b = 0;
      switch (dist) {
        case 0: b = bf(s, -static_cast<int>(u32(rng) % 8) - 1, m); break;
        case 1: b = bf(s, static_cast<int>(u32(rng) % 81) - 40, m); break;
        case 2:
          if (k % 2 == 1) {
            const uint16_t prev = v[static_cast<size_t>(r) * K + k - 1];
            b = is_x ? prev : static_cast<uint16_t>((prev ^ 0x8000) + (u32(rng) % 3) - 1);
          } else {
            b = bf(s, (u32(rng) % 64 == 0) ? 20 : static_cast<int>(u32(rng) % 10), m);
          }
          break;
        case 3: {
          const uint32_t pick = u32(rng) % 8;
          if (pick == 0) b = static_cast<uint16_t>((s << 15) | (u32(rng) % 127 + 1));  // bf16 denormal
          else if (pick == 1) b = bf(s, 0, m);
          else b = bf(s, -60 - static_cast<int>(u32(rng) % 10), m);
          break;
        }
        case 4: b = bf(s, static_cast<int>(u32(rng) % 25), m & 0x60); break;
      }
      v[static_cast<size_t>(r) * K + k] = b;
    }
}

template <int N>
int run_case(const uint16_t* dw, const uint16_t* dx, int K, float* d1, float* d2, std::vector<float>& h1,
             std::vector<float>& h2, int* first) {
  chain_mma_sync<<<1, 128>>>(dw, dx, N, K, d1);
  CK(cudaGetLastError());
  const int smem = (64 + N) * 128 + 1024;
  CK(cudaFuncSetAttribute(chain_wgmma<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaMemset(d2, 0xff, 64 * N * 4));  // poison: NaN bits, so an unwritten output shows
  chain_wgmma<N><<<1, 128, smem>>>(dw, dx, K, d2);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(h1.data(), d1, 64 * N * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(h2.data(), d2, 64 * N * 4, cudaMemcpyDeviceToHost));
  int diff = 0;
  *first = -1;
  for (int i = 0; i < 64 * N; ++i)
    if (std::memcmp(&h1[i], &h2[i], 4) != 0) {
      if (*first < 0) *first = i;
      ++diff;
      // A difference far beyond rounding means a layout bug in this probe, not numerics.
      if (!(std::fabs(h1[i] - h2[i]) <= 1e-3f * std::fabs(h1[i]) + 1e-30f)) ++g_far;
    }
  return diff;
}

}  // namespace

int main() {
  int dev = 0;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  const int Ks[] = {16, 64, 1040, 4096, 12288};
  const char* names[] = {"uniform", "wide-exp", "cancel", "denormal", "ties"};
  std::mt19937 rng(20261129);
  uint16_t *dw, *dx;
  float *d1, *d2;
  CK(cudaMalloc(&dw, 64ull * 12288 * 2));
  CK(cudaMalloc(&dx, 256ull * 12288 * 2));
  CK(cudaMalloc(&d1, 64 * 256 * 4));
  CK(cudaMalloc(&d2, 64 * 256 * 4));
  std::vector<float> h1(64 * 256), h2(64 * 256);
  long total = 0, total_diff = 0, nonzero = 0;
  for (int dist = 0; dist < 5; ++dist)
    for (int K : Ks) {
      std::vector<uint16_t> w(64ull * K), x(256ull * K);
      fill(w, 64, K, dist, rng, false);
      fill(x, 256, K, dist, rng, true);
      CK(cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
      std::printf("%-9s K=%-6d", names[dist], K);
      auto one = [&](int n, int diff, int first) {
        total += 64 * n;
        total_diff += diff;
        std::printf(" n%d:%d", n, diff);
        if (diff) std::printf("(first %d: mma %a wgmma %a)", first, h1[first], h2[first]);
      };
      int first, diff;
      diff = run_case<8>(dw, dx, K, d1, d2, h1, h2, &first); one(8, diff, first);
      diff = run_case<16>(dw, dx, K, d1, d2, h1, h2, &first); one(16, diff, first);
      diff = run_case<32>(dw, dx, K, d1, d2, h1, h2, &first); one(32, diff, first);
      diff = run_case<64>(dw, dx, K, d1, d2, h1, h2, &first); one(64, diff, first);
      diff = run_case<128>(dw, dx, K, d1, d2, h1, h2, &first); one(128, diff, first);
      diff = run_case<192>(dw, dx, K, d1, d2, h1, h2, &first); one(192, diff, first);
      diff = run_case<256>(dw, dx, K, d1, d2, h1, h2, &first); one(256, diff, first);
      for (int i = 0; i < 64 * 256; ++i) nonzero += h1[i] != 0.0f;
      std::printf("\n");
    }
  std::printf("PROBE %s: %ld of %ld outputs differ between wgmma and mma.sync chains "
              "(%ld of them by more than 1e-3 relative; %ld nonzero outputs in the n256 runs)\n",
              total_diff == 0 ? "BITWISE-EQUAL" : "DIFFERENT", total_diff, total, g_far, nonzero);
  return total_diff == 0 ? 0 : 2;
}
