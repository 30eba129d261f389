// linear (cuda_ops.h): y[m][n] = sum_k x[m][k] W[n][k] (+ bias[n]) on BF16 tensor cores.
//
// The one schedule (every kernel below obeys it, whatever M is): the weights are the MMA's A
// operand (16 weight rows x 16 k), the activations its B operand (16 k x 8 tokens, rounded to
// bf16 nearest-even when loaded or converted); each output element has ONE FP32 accumulator that
// starts at 0 and receives mma.sync.m16n8k16 k-steps k = 0, 16, 32, ... K-16 in increasing order,
// exactly K/16 of them (no zero-padded steps, no split-K), then + bias[n] (one FP32 add). An
// element's bits therefore depend only on its own x row, W row and K; the tiles below (how many
// weight rows and tokens a block covers, how many k a pipeline stage holds) are free.
//
// - skinny (M <= 64, decode and speculative verify): blocks of 2 warps x 16 weight rows, all the
//   call's tokens (8 * MT, MT = 1, 2, 4, 8) per warp, weights streamed through a deep cp.async
//   pipeline (128 k per stage, 4 to 8 stages). M <= 8 reads x as FP32 and rounds it in the
//   fragment; M > 8 first converts x to bf16 (one small kernel) so the x tile costs half.
// - tiled (M > 64, prefill): 128 weight rows x 128 tokens per block, 8 warps of 64 x 32,
//   64 k per stage, 4 stages, ldmatrix from XOR-swizzled shared memory.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mma.cuh"

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;

// Byte offset of 16-byte chunk c of row r in a tile whose rows are `row_bytes` long, XOR-swizzled
// so the 8 rows an ldmatrix reads hit 8 different bank groups.
__device__ __forceinline__ uint32_t swz(int r, int c, int row_bytes) {
  return static_cast<uint32_t>(r * row_bytes + ((c ^ (r & 7)) << 4));
}

// --- x to bf16 ------------------------------------------------------------------------------------
__global__ void to_bf16_kernel(const float* __restrict__ x, uint32_t* __restrict__ out, int64_t n2) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n2) {
    const float2 v = reinterpret_cast<const float2*>(x)[i];
    out[i] = pack_bf16x2(v.x, v.y);
  }
}

// --- skinny: M <= 64 ------------------------------------------------------------------------------
constexpr int kSkBK = 128;                // k per stage
constexpr int kSkRows = 32;               // weight rows per block (2 warps x 16)
constexpr int kSkWBytes = kSkRows * kSkBK * 2;  // 8 KiB
constexpr int kSkXF32Stride = kSkBK + 8;  // floats per x row (padding: conflict-free float2 reads)

template <int MT, bool XF32>
struct Skinny {
  static constexpr int kStages = MT <= 2 ? 8 : (MT == 4 ? 6 : 4);
  static constexpr int kXBytes = XF32 ? 8 * MT * kSkXF32Stride * 4 : 8 * MT * kSkBK * 2;
  static constexpr int kStageBytes = kSkWBytes + kXBytes;
  static constexpr int kSmem = kStages * kStageBytes;
};

template <int MT, bool XF32>
__global__ void __launch_bounds__(64) linear_skinny(const uint16_t* __restrict__ w,
                                                    const void* __restrict__ xv, int M, int N,
                                                    int K, const float* __restrict__ bias,
                                                    float* __restrict__ y) {
  using C = Skinny<MT, XF32>;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n0 = blockIdx.x * kSkRows;
  const int m0 = blockIdx.y * 8 * MT;
  const int nk = (K + kSkBK - 1) / kSkBK;
  const uint32_t base = smem_addr(smem);

  auto load = [&](int stage, int chunk) {
    const uint32_t ws = base + stage * C::kStageBytes;
    const int k0 = chunk * kSkBK;
#pragma unroll
    for (int i = 0; i < kSkRows * (kSkBK / 8) / 64; ++i) {
      const int idx = tid + 64 * i, r = idx >> 4, c = idx & 15;
      const int gk = k0 + c * 8;
      const bool ok = (n0 + r < N) && (gk < K);
      const uint16_t* src = ok ? w + static_cast<int64_t>(n0 + r) * K + gk : w;
      cp_async16(ws + swz(r, c, kSkBK * 2), src, ok);
    }
    const uint32_t xs = ws + kSkWBytes;
    if constexpr (XF32) {
      const float* x = static_cast<const float*>(xv);
#pragma unroll
      for (int i = 0; i < 8 * MT * (kSkBK / 4) / 64; ++i) {
        const int idx = tid + 64 * i, r = idx >> 5, c = idx & 31;
        const int gk = k0 + c * 4;
        const bool ok = (m0 + r < M) && (gk < K);
        const float* src = ok ? x + static_cast<int64_t>(m0 + r) * K + gk : x;
        cp_async16(xs + (r * kSkXF32Stride + c * 4) * 4, src, ok);
      }
    } else {
      const uint16_t* x = static_cast<const uint16_t*>(xv);
#pragma unroll
      for (int i = 0; i < 8 * MT * (kSkBK / 8) / 64; ++i) {
        const int idx = tid + 64 * i, r = idx >> 4, c = idx & 15;
        const int gk = k0 + c * 8;
        const bool ok = (m0 + r < M) && (gk < K);
        const uint16_t* src = ok ? x + static_cast<int64_t>(m0 + r) * K + gk : x;
        cp_async16(xs + swz(r, c, kSkBK * 2), src, ok);
      }
    }
  };

  float acc[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < nk) load(s, s);
    cp_async_commit();
  }

  const int g = lane >> 2, t = lane & 3;
  const int arow = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;  // A ldmatrix row
  const int acol = lane >> 4;                                        // A ldmatrix k half
  for (int kc = 0; kc < nk; ++kc) {
    cp_async_wait<C::kStages - 2>();
    __syncthreads();
    {
      const int next = kc + C::kStages - 1;
      if (next < nk) load(next % C::kStages, next);
      cp_async_commit();
    }
    const uint32_t ws = base + (kc % C::kStages) * C::kStageBytes;
    const uint32_t xs = ws + kSkWBytes;
    const int steps = min(kSkBK, K - kc * kSkBK) / 16;
#pragma unroll
    for (int s = 0; s < kSkBK / 16; ++s) {
      if (s < steps) {
        uint32_t a[4];
        ldmatrix_x4(a, ws + swz(arow, s * 2 + acol, kSkBK * 2));
        if constexpr (XF32) {
          const float* xf = reinterpret_cast<const float*>(smem + (kc % C::kStages) * C::kStageBytes + kSkWBytes);
#pragma unroll
          for (int j = 0; j < MT; ++j) {
            const float* row = xf + (j * 8 + g) * kSkXF32Stride + s * 16 + 2 * t;
            const float2 v0 = *reinterpret_cast<const float2*>(row);
            const float2 v1 = *reinterpret_cast<const float2*>(row + 8);
            mma_bf16_16816(acc[j], a, pack_bf16x2(v0.x, v0.y), pack_bf16x2(v1.x, v1.y));
          }
        } else {
#pragma unroll
          for (int jj = 0; jj < MT / 2; ++jj) {
            uint32_t b[4];
            const int r = jj * 16 + (lane & 7) + (lane >> 4) * 8;
            ldmatrix_x4(b, xs + swz(r, s * 2 + ((lane >> 3) & 1), kSkBK * 2));
            mma_bf16_16816(acc[2 * jj], a, b[0], b[1]);
            mma_bf16_16816(acc[2 * jj + 1], a, b[2], b[3]);
          }
        }
      }
    }
  }
  cp_async_wait<0>();

#pragma unroll
  for (int j = 0; j < MT; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int n = n0 + warp * 16 + g + (e >> 1) * 8;
      const int m = m0 + j * 8 + 2 * t + (e & 1);
      if (n < N && m < M) {
        float v = acc[j][e];
        if (bias) v = __fadd_rn(v, bias[n]);
        y[static_cast<int64_t>(m) * N + n] = v;
      }
    }
  }
}

// --- tiled: M > 64 --------------------------------------------------------------------------------
constexpr int kTBN = 128, kTBM = 128, kTBK = 64, kTStages = 4;
constexpr int kTRowBytes = kTBK * 2;                            // 128 B
constexpr int kTStageBytes = (kTBN + kTBM) * kTRowBytes;        // 32 KiB
constexpr int kTSmem = kTStages * kTStageBytes;                 // 128 KiB

__global__ void __launch_bounds__(256, 1) linear_tiled(const uint16_t* __restrict__ w,
                                                       const uint16_t* __restrict__ x, int M,
                                                       int N, int K,
                                                       const float* __restrict__ bias,
                                                       float* __restrict__ y) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wn = warp & 1, wm = warp >> 1;  // warp tile: 64 weight rows x 32 tokens
  const int n0 = blockIdx.x * kTBN, m0 = blockIdx.y * kTBM;
  const int nk = (K + kTBK - 1) / kTBK;
  const uint32_t base = smem_addr(smem);

  auto load = [&](int stage, int chunk) {
    const uint32_t ws = base + stage * kTStageBytes;
    const uint32_t xs = ws + kTBN * kTRowBytes;
    const int k0 = chunk * kTBK;
#pragma unroll
    for (int i = 0; i < kTBN * 8 / 256; ++i) {
      const int idx = tid + 256 * i, r = idx >> 3, c = idx & 7;
      const int gk = k0 + c * 8;
      const bool ok = (n0 + r < N) && (gk < K);
      cp_async16(ws + swz(r, c, kTRowBytes), ok ? w + static_cast<int64_t>(n0 + r) * K + gk : w, ok);
    }
#pragma unroll
    for (int i = 0; i < kTBM * 8 / 256; ++i) {
      const int idx = tid + 256 * i, r = idx >> 3, c = idx & 7;
      const int gk = k0 + c * 8;
      const bool ok = (m0 + r < M) && (gk < K);
      cp_async16(xs + swz(r, c, kTRowBytes), ok ? x + static_cast<int64_t>(m0 + r) * K + gk : x, ok);
    }
  };

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

#pragma unroll
  for (int s = 0; s < kTStages - 1; ++s) {
    if (s < nk) load(s, s);
    cp_async_commit();
  }
  for (int kc = 0; kc < nk; ++kc) {
    cp_async_wait<kTStages - 2>();
    __syncthreads();
    {
      const int next = kc + kTStages - 1;
      if (next < nk) load(next % kTStages, next);
      cp_async_commit();
    }
    const uint32_t ws = base + (kc % kTStages) * kTStageBytes;
    const uint32_t xs = ws + kTBN * kTRowBytes;
    const int steps = min(kTBK, K - kc * kTBK) / 16;
#pragma unroll
    for (int s = 0; s < kTBK / 16; ++s) {
      if (s < steps) {
        uint32_t a[4][4], b[2][4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = wn * 64 + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
          ldmatrix_x4(a[i], ws + swz(r, s * 2 + (lane >> 4), kTRowBytes));
        }
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const int r = wm * 32 + jj * 16 + (lane & 7) + (lane >> 4) * 8;
          ldmatrix_x4(b[jj], xs + swz(r, s * 2 + ((lane >> 3) & 1), kTRowBytes));
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            mma_bf16_16816(acc[i][j], a[i], b[j >> 1][(j & 1) * 2], b[j >> 1][(j & 1) * 2 + 1]);
      }
    }
  }
  cp_async_wait<0>();

  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int n = n0 + wn * 64 + i * 16 + g + (e >> 1) * 8;
        const int m = m0 + wm * 32 + j * 8 + 2 * t + (e & 1);
        if (n < N && m < M) {
          float v = acc[i][j][e];
          if (bias) v = __fadd_rn(v, bias[n]);
          y[static_cast<int64_t>(m) * N + n] = v;
        }
      }
}

// Raises a kernel's dynamic shared-memory limit, once per kernel (the static lives in each
// instantiation of this template, one per kernel).
template <auto Kernel>
void allow_smem(int bytes) {
  static const bool done = [&] {
    check(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
          "linear: set shared memory limit");
    return true;
  }();
  (void)done;
}

template <int MT, bool XF32>
void launch_skinny(const uint16_t* w, const void* x, int M, int N, int K, const float* bias,
                   float* y) {
  using C = Skinny<MT, XF32>;
  allow_smem<linear_skinny<MT, XF32>>(C::kSmem);
  const dim3 grid((N + kSkRows - 1) / kSkRows, (M + 8 * MT - 1) / (8 * MT));
  linear_skinny<MT, XF32><<<grid, 64, C::kSmem, stream()>>>(w, x, M, N, K, bias, y);
  check_launch("linear (skinny kernel)");
}

}  // namespace

void linear(const float* x, int64_t M, const Weight& w, const float* bias, float* y) {
  if (w.quant != QuantFormat::None)
    fail("CUDA linear: quantized weights are not supported (the backend dequantizes them to BF16)");
  if (w.dtype != DType::BF16)
    fail("CUDA linear: weight dtype ", dtype_name(w.dtype), " is not supported (expected BF16)");
  const int64_t N = w.rows, K = w.cols;
  if (K % 16 != 0) fail("CUDA linear: K = ", K, " is not a multiple of 16");
  if (N <= 0 || K <= 0 || M < 0) fail("CUDA linear: bad shape M=", M, " N=", N, " K=", K);
  if (M > (int64_t{1} << 30) || N > (int64_t{1} << 30) || K > (int64_t{1} << 30))
    fail("CUDA linear: shape too large M=", M, " N=", N, " K=", K);
  if (M == 0) return;
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(w.data) % 16 != 0)
    fail("CUDA linear: x and the weights must be 16-byte aligned device pointers");
  const auto* wd = static_cast<const uint16_t*>(w.data);
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  if (M <= 8) {
    launch_skinny<1, true>(wd, x, m, n, k, bias, y);
    return;
  }
  auto* xb = static_cast<uint16_t*>(scratch(0, static_cast<size_t>(M * K) * 2));
  {
    const int64_t n2 = M * K / 2;
    to_bf16_kernel<<<blocks_for(n2, 256), 256, 0, stream()>>>(x, reinterpret_cast<uint32_t*>(xb), n2);
    check_launch("linear (bf16 conversion)");
  }
  if (M <= 16) {
    launch_skinny<2, false>(wd, xb, m, n, k, bias, y);
  } else if (M <= 32) {
    launch_skinny<4, false>(wd, xb, m, n, k, bias, y);
  } else if (M <= 64) {
    launch_skinny<8, false>(wd, xb, m, n, k, bias, y);
  } else {
    allow_smem<linear_tiled>(kTSmem);
    const dim3 grid((n + kTBN - 1) / kTBN, (m + kTBM - 1) / kTBM);
    linear_tiled<<<grid, 256, kTSmem, stream()>>>(wd, xb, m, n, k, bias, y);
    check_launch("linear (tiled kernel)");
  }
}

}  // namespace lockstep::kernels::cuda
