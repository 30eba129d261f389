// The per-element and per-row ops of cuda_ops.h: embedding, rms_norm, rope, silu_mul, add,
// sigmoid_mul, kv_write, gather_rows. Each output element is computed by one
// thread from its own inputs (rms_norm: one block per row, fixed strides and tree), so nothing
// depends on how many rows a call has. exp/silu/sigmoid are the CPU's polynomials (common.cuh):
// silu_mul and sigmoid_mul give the CPU's bits.
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 256;

__global__ void embedding_kernel(const uint16_t* __restrict__ table, const int32_t* __restrict__ ids,
                                 int64_t n, int64_t D, float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * D) return;
  const int64_t r = i / D, d = i % D;
  const uint32_t bits = static_cast<uint32_t>(table[static_cast<int64_t>(ids[r]) * D + d]) << 16;
  out[i] = __uint_as_float(bits);
}

// One block of 256 threads per row: thread i sums x[d]^2 for d = i, i + 256, ... with fmaf in
// that order, a xor-butterfly per warp, then warp 0..7 results added in order by thread 0.
__global__ void __launch_bounds__(kThreads) rms_norm_kernel(const float* x, int64_t D,
                                                            const float* __restrict__ w, float eps,
                                                            bool zero_centered, float* y) {
  __shared__ float part[kThreads / 32];
  __shared__ float factor;
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * D;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * D;
  float s = 0.0f;
  for (int64_t d = threadIdx.x; d < D; d += kThreads) s = __fmaf_rn(xr[d], xr[d], s);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, o));
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = part[0];
#pragma unroll
    for (int i = 1; i < kThreads / 32; ++i) total = __fadd_rn(total, part[i]);
    factor = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(total, static_cast<float>(D)), eps)));
  }
  __syncthreads();
  const float r = factor;
  for (int64_t d = threadIdx.x; d < D; d += kThreads) {
    const float xs = __fmul_rn(xr[d], r);
    yr[d] = __fmul_rn(xs, zero_centered ? __fadd_rn(1.0f, w[d]) : w[d]);
  }
}

__global__ void rope_kernel(float* x, int64_t M, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                            const float* __restrict__ cos_sin) {
  const int64_t half = rotary_dim / 2;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= M * heads * half) return;
  const int64_t j = i % half, mh = i / half, m = mh / heads;
  const float* c = cos_sin + m * rotary_dim;
  const float* s = c + half;
  float* v = x + mh * head_dim;
  const float a = v[j], b = v[j + half];
  v[j] = __fsub_rn(__fmul_rn(a, c[j]), __fmul_rn(b, s[j]));
  v[j + half] = __fadd_rn(__fmul_rn(b, c[j]), __fmul_rn(a, s[j]));
}

__global__ void silu_mul_kernel(const float* gate, const float* up, float* out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __fmul_rn(silu_f32(gate[i]), up[i]);
}

__global__ void add_kernel(float* x, const float* delta, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __fadd_rn(x[i], delta[i]);
}

__global__ void sigmoid_mul_kernel(float* x, const float* gate, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __fmul_rn(x[i], sigmoid_f32(gate[i]));
}

__global__ void kv_write_kernel(const float* __restrict__ k, const float* __restrict__ v, int64_t T,
                                int64_t kv_dim, const int32_t* __restrict__ slots,
                                float* __restrict__ k_cache, float* __restrict__ v_cache) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * kv_dim) return;
  const int64_t t = i / kv_dim, j = i % kv_dim;
  const int64_t dst = static_cast<int64_t>(slots[t]) * kv_dim + j;
  k_cache[dst] = k[i];
  v_cache[dst] = v[i];
}

__global__ void gather_rows_kernel(const float* __restrict__ x, const int32_t* __restrict__ rows,
                                   int64_t n, int64_t D, float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * D) return;
  out[i] = x[static_cast<int64_t>(rows[i / D]) * D + i % D];
}

}  // namespace

void embedding(const Weight& table, const int32_t* ids, int64_t n, float* out) {
  if (table.quant != QuantFormat::None || table.dtype != DType::BF16)
    fail("CUDA embedding: the table must be BF16 (found ", dtype_name(table.dtype), ")");
  if (n <= 0) return;
  embedding_kernel<<<blocks_for(n * table.cols, kThreads), kThreads, 0, stream()>>>(
      static_cast<const uint16_t*>(table.data), ids, n, table.cols, out);
  check_launch("embedding");
}

void rms_norm(const float* x, int64_t M, int64_t D, const float* w, float eps, bool zero_centered,
              float* y) {
  if (M <= 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream()>>>(x, D, w, eps, zero_centered, y);
  check_launch("rms_norm");
}

void rope(float* x, int64_t M, int64_t heads, int64_t head_dim, int64_t rotary_dim,
          const float* cos_sin) {
  if (rotary_dim % 2 != 0 || rotary_dim > head_dim)
    fail("CUDA rope: rotary_dim ", rotary_dim, " must be even and at most head_dim ", head_dim);
  const int64_t n = M * heads * (rotary_dim / 2);
  if (n <= 0) return;
  rope_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(x, M, heads, head_dim, rotary_dim,
                                                                 cos_sin);
  check_launch("rope");
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  if (n <= 0) return;
  silu_mul_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(gate, up, out, n);
  check_launch("silu_mul");
}

void add(float* x, const float* delta, int64_t n) {
  if (n <= 0) return;
  add_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(x, delta, n);
  check_launch("add");
}

void sigmoid_mul(float* x, const float* gate, int64_t n) {
  if (n <= 0) return;
  sigmoid_mul_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(x, gate, n);
  check_launch("sigmoid_mul");
}

void kv_write(const float* k, const float* v, int64_t T, int64_t kv_dim, const int32_t* slots,
              float* k_cache, float* v_cache) {
  if (T * kv_dim <= 0) return;
  kv_write_kernel<<<blocks_for(T * kv_dim, kThreads), kThreads, 0, stream()>>>(k, v, T, kv_dim, slots,
                                                                              k_cache, v_cache);
  check_launch("kv_write");
}

void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t D, float* out) {
  if (n * D <= 0) return;
  gather_rows_kernel<<<blocks_for(n * D, kThreads), kThreads, 0, stream()>>>(x, rows, n, D, out);
  check_launch("gather_rows");
}

}  // namespace lockstep::kernels::cuda
