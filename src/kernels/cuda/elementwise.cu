// The per-element and per-row ops of cuda_ops.h: embedding, rms_norm, add_rms_norm, rope,
// attention_prep, silu_mul, gelu_tanh_mul, scale, softcap, add, sigmoid_mul, kv_write, gather_rows. Each output element is
// computed by one thread from its own inputs (the norms: one block per row, fixed strides and
// tree, rms_factor), so nothing depends on how many rows a call has; the fused ops run the same
// per-element arithmetic as the ops they replace, so they give the same bits. exp/silu/sigmoid
// are the CPU's polynomials (common.cuh): silu_mul and sigmoid_mul give the CPU's bits.
//
// At one row (decode) these kernels cost their launch and one round of dependent memory
// latency, not bandwidth (a 4096-float row is 16 KiB): what pays there is fewer launches (the
// fused ops) and issuing a row's loads together (the norms' register-held rows).
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_caps.h"
#include "kernels/cuda/mma.cuh"

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 256;

// Threads a block for a per-element launch of n items: kThreads, or 64 where kThreads would fill
// fewer blocks than the GPU has multiprocessors. A decode step's few thousand elements (an MoE
// combination, SiLU-up) then spread over four times the multiprocessors, each with a quarter of
// the loads in flight. Each element is still one thread's, so the bits do not move.
int elementwise_threads(int64_t n) {
  return blocks_for(n, kThreads) < static_cast<unsigned>(device_caps().sm_count) ? 64 : kThreads;
}

__global__ void embedding_kernel(const uint16_t* __restrict__ table, const int32_t* __restrict__ ids,
                                 int64_t n, int64_t D, float* __restrict__ out) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * D) return;
  const int64_t r = i / D, d = i % D;
  const uint32_t bits = static_cast<uint32_t>(table[static_cast<int64_t>(ids[r]) * D + d]) << 16;
  out[i] = __uint_as_float(bits);
}

// The xor butterfly of one warp (offsets 16, 8, 4, 2, 1): every lane ends with a sum, lane 0's is
// the one rms_factor keeps.
__device__ __forceinline__ float warp_xor_sum(float s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, o));
  return s;
}

// 1 / sqrt(sum / D + eps): the norm factor from a row's sum of squares.
__device__ __forceinline__ float rms_from_sum(float total, int64_t D, float eps) {
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(total, static_cast<float>(D)), eps)));
}

// The one row reduction of every RMSNorm here (blocks of 256 threads): s is this thread's sum of
// x[d]^2 over d = i, i + 256, ... (fmaf, in that order); a xor butterfly per warp, then warps
// 0..7 added in order by thread 0. Returns 1 / sqrt(sum / D + eps) to every thread. The order is
// a function of D alone (never of the number of rows or where the row sits).
__device__ __forceinline__ float rms_factor(float s, int64_t D, float eps) {
  __shared__ float part[kThreads / 32];
  __shared__ float factor;
  s = warp_xor_sum(s);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = part[0];
#pragma unroll
    for (int i = 1; i < kThreads / 32; ++i) total = __fadd_rn(total, part[i]);
    factor = rms_from_sum(total, D, eps);
  }
  __syncthreads();
  return factor;
}

__device__ __forceinline__ float norm_weight(const float* w, int64_t d, bool zero_centered) {
  return zero_centered ? __fadd_rn(1.0f, w[d]) : w[d];
}

// One block of 256 threads per row (rms_factor's schedule); ADD first does x += delta on the row
// (the add kernel's one FP32 add per element) and normalises the sums. PER > 0: D <= 256 PER and
// each thread keeps its PER elements (and their weights) in registers, all loads issued at once:
// a single row at decode waits on memory round trips, not bandwidth; PER = 0: any D, the row
// read twice. Same bits either way.
template <int PER, bool ADD>
__global__ void __launch_bounds__(kThreads) rms_norm_kernel(float* x, const float* delta, int64_t D,
                                                            const float* __restrict__ w, float eps,
                                                            bool zero_centered, float* y) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t row = blockIdx.x;
  float* xr = x + row * D;
  float* yr = y + row * D;
  const float* dr = ADD ? delta + row * D : nullptr;
  const int tid = threadIdx.x;
  float s = 0.0f;
  if constexpr (PER > 0) {
    // Every load first (x, delta, w), before any store: x may alias y and delta, so a load
    // written after a store could not be moved above it, and each would wait a memory round trip.
    float v[PER], wv[PER], dv[ADD ? PER : 1];
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int64_t d = tid + static_cast<int64_t>(i) * kThreads;
      v[i] = d < D ? xr[d] : 0.0f;
      if constexpr (ADD) dv[i] = d < D ? dr[d] : 0.0f;
      wv[i] = d < D ? w[d] : 0.0f;
    }
    if constexpr (ADD) {
#pragma unroll
      for (int i = 0; i < PER; ++i) {
        const int64_t d = tid + static_cast<int64_t>(i) * kThreads;
        if (d < D) {
          v[i] = __fadd_rn(v[i], dv[i]);
          xr[d] = v[i];
        }
      }
    }
#pragma unroll
    for (int i = 0; i < PER; ++i)
      if (tid + static_cast<int64_t>(i) * kThreads < D) s = __fmaf_rn(v[i], v[i], s);
    const float r = rms_factor(s, D, eps);
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int64_t d = tid + static_cast<int64_t>(i) * kThreads;
      if (d < D)
        yr[d] = __fmul_rn(__fmul_rn(v[i], r), zero_centered ? __fadd_rn(1.0f, wv[i]) : wv[i]);
    }
  } else {
    for (int64_t d = tid; d < D; d += kThreads) {
      float v = xr[d];
      if constexpr (ADD) {
        v = __fadd_rn(v, dr[d]);
        xr[d] = v;
      }
      s = __fmaf_rn(v, v, s);
    }
    const float r = rms_factor(s, D, eps);
    for (int64_t d = tid; d < D; d += kThreads)
      yr[d] = __fmul_rn(__fmul_rn(xr[d], r), norm_weight(w, d, zero_centered));
  }
}

template <bool ADD>
void launch_rms_norm(float* x, const float* delta, int64_t M, int64_t D, const float* w, float eps,
                     bool zero_centered, float* y) {
  const dim3 grid(static_cast<unsigned>(M));
  const int64_t per = (D + kThreads - 1) / kThreads;
  if (per <= 1) launch("rms_norm_kernel", rms_norm_kernel<1, ADD>, grid, kThreads, 0, x, delta, D, w, eps, zero_centered, y);
  else if (per <= 2) launch("rms_norm_kernel", rms_norm_kernel<2, ADD>, grid, kThreads, 0, x, delta, D, w, eps, zero_centered, y);
  else if (per <= 4) launch("rms_norm_kernel", rms_norm_kernel<4, ADD>, grid, kThreads, 0, x, delta, D, w, eps, zero_centered, y);
  else if (per <= 8) launch("rms_norm_kernel", rms_norm_kernel<8, ADD>, grid, kThreads, 0, x, delta, D, w, eps, zero_centered, y);
  else if (per <= 16) launch("rms_norm_kernel", rms_norm_kernel<16, ADD>, grid, kThreads, 0, x, delta, D, w, eps, zero_centered, y);
  else if (per <= 32) launch("rms_norm_kernel", rms_norm_kernel<32, ADD>, grid, kThreads, 0, x, delta, D, w, eps, zero_centered, y);
  else launch("rms_norm_kernel", rms_norm_kernel<0, ADD>, grid, kThreads, 0, x, delta, D, w, eps, zero_centered, y);
}

// attention_prep (cuda_ops.h), fused: each (row, head), q heads then k heads, is read once (from
// q_in's stride for q) into registers, normalised with rms_norm's exact schedule when it has a
// norm weight, shared through shared memory for RoPE's pairs, then each element is rotated as the
// rope kernel does it and written; k heads also go to their cache slot (BF16, kv_write's
// rounding), with their v.
struct PrepArgs {
  const float* q_in;
  int64_t q_in_stride;
  float* q;
  float* k;
  const float* v;
  int64_t n_heads, n_kv_heads, head_dim, rotary_dim;
  const float* q_norm;
  const float* k_norm;
  float eps;
  bool zero_centered;
  const float* cos_sin;
  const int32_t* slots;
  uint16_t* k_cache;  // BF16; null: no cache write
  uint16_t* v_cache;
};

// One warp per (row, head), eight a block, head_dim <= 256 (every model so far; larger heads run
// the ops one by one, attention_prep below). A 256-thread block per head left half its threads
// idle at head_dim 128 and scheduled 80k blocks for a 2048-token Qwen3-8B prefill (264 us of it
// on an H200, 83 us this way). A lane holds elements d = lane + 32 w (w < 8). The norm is
// rms_norm's (rms_factor's) schedule, element for element: d's square fmaf(x, x, 0) goes through
// the xor butterfly of rms_factor's warp d / 32 (this warp's lanes are that warp's lanes), and the
// warp sums are added in order as its thread 0 adds them (its warps past head_dim add zeros:
// x + 0 = x for these non-negative sums); the factor, the products and RoPE are the same
// expressions.
constexpr int kPrepWarpMaxHeadDim = 256;
__global__ void __launch_bounds__(kThreads) attention_prep_warp_kernel(const __grid_constant__ PrepArgs a,
                                                                       int64_t n_items) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  constexpr int kW = kPrepWarpMaxHeadDim / 32;
  __shared__ float buf[kThreads / 32][kPrepWarpMaxHeadDim];
  const int lane = threadIdx.x & 31, wi = threadIdx.x >> 5;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + wi;
  if (item >= n_items) return;  // a whole warp: no block barrier below
  const int64_t heads = a.n_heads + a.n_kv_heads;
  const int64_t t = item / heads, j = item % heads;
  const bool is_q = j < a.n_heads;
  const int64_t hd = a.head_dim, rot = a.rotary_dim, half = rot / 2;
  const int64_t head_row = is_q ? t * a.n_heads + j : t * a.n_kv_heads + (j - a.n_heads);
  const float* src = is_q ? a.q_in + head_row * a.q_in_stride : a.k + head_row * hd;
  float* dst = (is_q ? a.q : a.k) + head_row * hd;
  const float* nw = is_q ? a.q_norm : a.k_norm;
  const float* c = a.cos_sin + t * rot;
  const float* sn = c + half;
  const bool cache = !is_q && a.k_cache;
  const int64_t at = cache ? static_cast<int64_t>(a.slots[t]) * a.n_kv_heads * hd +
                                 (j - a.n_heads) * hd
                           : 0;
  // Every load before any store (src may be dst), as in the block kernel.
  float xv[kW], wv[kW], cv[kW], sv[kW], vv[kW];
#pragma unroll
  for (int w = 0; w < kW; ++w) {
    const int64_t d = lane + 32 * w;
    const bool in = d < hd;
    const int64_t ci = d < half ? d : d - half;
    xv[w] = in ? src[d] : 0.0f;
    wv[w] = in && nw ? nw[d] : 0.0f;
    cv[w] = in && d < rot ? c[ci] : 0.0f;
    sv[w] = in && d < rot ? sn[ci] : 0.0f;
    vv[w] = in && cache ? a.v[head_row * hd + d] : 0.0f;
  }
  if (nw) {
    float part[kW];
#pragma unroll
    for (int w = 0; w < kW; ++w) {
      // lane 0's is the sum rms_factor's warp w hands on
      part[w] = warp_xor_sum(lane + 32 * w < hd ? __fmaf_rn(xv[w], xv[w], 0.0f) : 0.0f);
    }
    float total = part[0];
#pragma unroll
    for (int w = 1; w < kW; ++w) total = __fadd_rn(total, part[w]);
    total = __shfl_sync(0xffffffffu, total, 0);
    const float r = rms_from_sum(total, hd, a.eps);
#pragma unroll
    for (int w = 0; w < kW; ++w)
      xv[w] = __fmul_rn(__fmul_rn(xv[w], r), a.zero_centered ? __fadd_rn(1.0f, wv[w]) : wv[w]);
  }
  float* b = buf[wi];
#pragma unroll
  for (int w = 0; w < kW; ++w)
    if (lane + 32 * w < hd) b[lane + 32 * w] = xv[w];
  __syncwarp();
#pragma unroll
  for (int w = 0; w < kW; ++w) {
    const int64_t d = lane + 32 * w;
    if (d >= hd) continue;
    float o;
    if (d < half) {
      o = __fsub_rn(__fmul_rn(xv[w], cv[w]), __fmul_rn(b[d + half], sv[w]));
    } else if (d < rot) {
      o = __fadd_rn(__fmul_rn(xv[w], cv[w]), __fmul_rn(b[d - half], sv[w]));
    } else {
      o = xv[w];
    }
    dst[d] = o;
    if (cache) {
      a.k_cache[at + d] = bf16_rne(o);
      a.v_cache[at + d] = bf16_rne(vv[w]);
    }
  }
}

__global__ void rope_kernel(float* x, int64_t M, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                            const float* __restrict__ cos_sin) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
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

// Four elements a thread when n and the pointers allow 16-byte accesses (prefill: 2048 x 12288
// elements, where one element a thread reached half the copy bandwidth), else one.
template <int V>
__global__ void silu_mul_kernel(const float* gate, const float* up, float* out, int64_t n) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (i >= n) return;
  if constexpr (V == 4) {
    const float4 g = *reinterpret_cast<const float4*>(gate + i);
    const float4 u = *reinterpret_cast<const float4*>(up + i);
    *reinterpret_cast<float4*>(out + i) =
        make_float4(__fmul_rn(silu_f32(g.x), u.x), __fmul_rn(silu_f32(g.y), u.y),
                    __fmul_rn(silu_f32(g.z), u.z), __fmul_rn(silu_f32(g.w), u.w));
  } else {
    out[i] = __fmul_rn(silu_f32(gate[i]), up[i]);
  }
}

// Gemma's ops: out = gelu_tanh(gate) * up, x *= s, x = cap * tanh(x / cap); one element a thread.
__global__ void gelu_tanh_mul_kernel(const float* gate, const float* up, float* out, int64_t n) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __fmul_rn(gelu_tanh_f32(gate[i]), up[i]);
}

__global__ void scale_kernel(float* x, int64_t n, float s) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __fmul_rn(x[i], s);
}

__global__ void softcap_kernel(float* x, int64_t n, float cap) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = softcap_f32(x[i], cap);
}

__global__ void add_kernel(float* x, const float* delta, int64_t n) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __fadd_rn(x[i], delta[i]);
}

__global__ void sigmoid_mul_kernel(float* x, const float* gate, int64_t n) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __fmul_rn(x[i], sigmoid_f32(gate[i]));
}

// Each element rounded to BF16 (nearest-even) as it is stored.
__global__ void kv_write_kernel(const float* __restrict__ k, const float* __restrict__ v, int64_t T,
                                int64_t kv_dim, const int32_t* __restrict__ slots,
                                uint16_t* __restrict__ k_cache, uint16_t* __restrict__ v_cache) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * kv_dim) return;
  const int64_t t = i / kv_dim, j = i % kv_dim;
  const int64_t dst = static_cast<int64_t>(slots[t]) * kv_dim + j;
  k_cache[dst] = bf16_rne(k[i]);
  v_cache[dst] = bf16_rne(v[i]);
}

__global__ void gather_rows_kernel(const float* __restrict__ x, const int32_t* __restrict__ rows,
                                   int64_t n, int64_t D, float* __restrict__ out) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * D) return;
  out[i] = x[static_cast<int64_t>(rows[i / D]) * D + i % D];
}

__global__ void moe_combine_kernel(const float* __restrict__ y, const int32_t* __restrict__ rows,
                                   const float* __restrict__ w, int64_t T, int64_t k, int64_t D,
                                   const float* __restrict__ shared,
                                   const float* __restrict__ shared_gate, float* __restrict__ out) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * D) return;
  const int64_t t = i / D, d = i % D;
  auto y_of = [&](int64_t a) { return y[(rows ? static_cast<int64_t>(rows[a]) : a) * D + d]; };
  float acc = __fmul_rn(w[t * k], y_of(t * k));
  for (int64_t j = 1; j < k; ++j) acc = __fadd_rn(acc, __fmul_rn(w[t * k + j], y_of(t * k + j)));
  if (shared) acc = __fadd_rn(acc, __fmul_rn(sigmoid_f32(shared_gate[t]), shared[i]));
  out[i] = acc;
}

}  // namespace

void embedding(const Weight& table, const int32_t* ids, int64_t n, float* out) {
  if (table.quant != QuantFormat::None || table.dtype != DType::BF16)
    fail("CUDA embedding: the table must be BF16 (found ", dtype_name(table.dtype), ")");
  if (n <= 0) return;
  launch("embedding_kernel", embedding_kernel, blocks_for(n * table.cols, kThreads), kThreads, 0, static_cast<const uint16_t*>(table.data), ids, n, table.cols, out);
}

void rms_norm(const float* x, int64_t M, int64_t D, const float* w, float eps, bool zero_centered,
              float* y) {
  if (M <= 0) return;
  launch_rms_norm<false>(const_cast<float*>(x), nullptr, M, D, w, eps, zero_centered, y);
}

void add_rms_norm(float* x, const float* delta, int64_t M, int64_t D, const float* w, float eps,
                  bool zero_centered, float* y) {
  if (M <= 0) return;
  launch_rms_norm<true>(x, delta, M, D, w, eps, zero_centered, y);
}

void attention_prep(const AttentionPrep& p, const KvLayerView& kv) {
  const int64_t hd = kv.head_dim, nkv = kv.n_kv_heads;
  if (p.rotary_dim % 2 != 0 || p.rotary_dim > hd)
    fail("CUDA attention_prep: rotary_dim ", p.rotary_dim, " must be even and at most head_dim ",
         hd);
  if (kv.k && kv.dtype != kKvDtype) fail("CUDA attention_prep: the KV cache must be BF16");
  if (p.T <= 0) return;
  if (hd > kPrepWarpMaxHeadDim || (p.q_in != p.q && p.q_in_stride < hd)) {
    // Outside the fused kernel's reach: the same ops one by one.
    if (p.q_in != p.q) copy_2d(p.q, hd, p.q_in, p.q_in_stride, p.T * p.n_heads, hd);
    if (p.q_norm) rms_norm(p.q, p.T * p.n_heads, hd, p.q_norm, p.eps, p.zero_centered, p.q);
    if (p.k_norm) rms_norm(p.k, p.T * nkv, hd, p.k_norm, p.eps, p.zero_centered, p.k);
    rope(p.q, p.T, p.n_heads, hd, p.rotary_dim, p.cos_sin);
    rope(p.k, p.T, nkv, hd, p.rotary_dim, p.cos_sin);
    if (kv.k)
      kv_write(p.k, p.v, p.T, nkv * hd, p.slots, const_cast<void*>(kv.k),
               const_cast<void*>(kv.v));
    return;
  }
  PrepArgs a{p.q_in, p.q_in_stride, p.q, p.k, p.v, p.n_heads, nkv, hd, p.rotary_dim,
             p.q_norm, p.k_norm, p.eps, p.zero_centered, p.cos_sin, p.slots,
             static_cast<uint16_t*>(const_cast<void*>(kv.k)),
             static_cast<uint16_t*>(const_cast<void*>(kv.v))};
  const int64_t items = p.T * (p.n_heads + nkv);
  const int64_t blocks = (items + kThreads / 32 - 1) / (kThreads / 32);
  launch("attention_prep_warp_kernel", attention_prep_warp_kernel, static_cast<unsigned>(blocks),
         kThreads, 0, a, items);
}

void rope(float* x, int64_t M, int64_t heads, int64_t head_dim, int64_t rotary_dim,
          const float* cos_sin) {
  if (rotary_dim % 2 != 0 || rotary_dim > head_dim)
    fail("CUDA rope: rotary_dim ", rotary_dim, " must be even and at most head_dim ", head_dim);
  const int64_t n = M * heads * (rotary_dim / 2);
  if (n <= 0) return;
  launch("rope_kernel", rope_kernel, blocks_for(n, kThreads), kThreads, 0, x, M, heads, head_dim, rotary_dim, cos_sin);
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  if (n <= 0) return;
  const bool vec = n % 4 == 0 && (reinterpret_cast<uintptr_t>(gate) | reinterpret_cast<uintptr_t>(up) |
                                   reinterpret_cast<uintptr_t>(out)) % 16 == 0;
  const int64_t items = vec ? n / 4 : n;
  const int threads = elementwise_threads(items);
  if (vec)
    launch("silu_mul_kernel", silu_mul_kernel<4>, blocks_for(items, threads), threads, 0, gate, up, out, n);
  else
    launch("silu_mul_kernel", silu_mul_kernel<1>, blocks_for(items, threads), threads, 0, gate, up, out, n);
}

void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  if (n <= 0) return;
  const int threads = elementwise_threads(n);
  launch("gelu_tanh_mul_kernel", gelu_tanh_mul_kernel, blocks_for(n, threads), threads, 0, gate,
         up, out, n);
}

void scale(float* x, int64_t n, float s) {
  if (n <= 0) return;
  launch("scale_kernel", scale_kernel, blocks_for(n, kThreads), kThreads, 0, x, n, s);
}

void softcap(float* x, int64_t n, float cap) {
  if (n <= 0) return;
  launch("softcap_kernel", softcap_kernel, blocks_for(n, kThreads), kThreads, 0, x, n, cap);
}

void add(float* x, const float* delta, int64_t n) {
  if (n <= 0) return;
  launch("add_kernel", add_kernel, blocks_for(n, kThreads), kThreads, 0, x, delta, n);
}

void sigmoid_mul(float* x, const float* gate, int64_t n) {
  if (n <= 0) return;
  launch("sigmoid_mul_kernel", sigmoid_mul_kernel, blocks_for(n, kThreads), kThreads, 0, x, gate, n);
}

void kv_write(const float* k, const float* v, int64_t T, int64_t kv_dim, const int32_t* slots,
              void* k_cache, void* v_cache) {
  if (T * kv_dim <= 0) return;
  launch("kv_write_kernel", kv_write_kernel, blocks_for(T * kv_dim, kThreads), kThreads, 0, k, v, T, kv_dim, slots, static_cast<uint16_t*>(k_cache), static_cast<uint16_t*>(v_cache));
}

void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t D, float* out) {
  if (n * D <= 0) return;
  launch("gather_rows_kernel", gather_rows_kernel, blocks_for(n * D, kThreads), kThreads, 0, x, rows, n, D, out);
}

void moe_combine(const float* expert_out, const int32_t* rows, const float* weights, int64_t T,
                 int64_t k, int64_t D, const float* shared, const float* shared_gate, float* out) {
  if (T * D <= 0) return;
  const int threads = elementwise_threads(T * D);
  launch("moe_combine_kernel", moe_combine_kernel, blocks_for(T * D, threads), threads, 0,
         expert_out, rows, weights, T, k, D, shared, shared_gate, out);
}

}  // namespace lockstep::kernels::cuda
