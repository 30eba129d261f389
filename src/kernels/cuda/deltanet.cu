// Gated DeltaNet on the GPU (cuda_ops.h, "Gated DeltaNet"): deltanet_step and gated_rms_norm.
//
// deltanet_step is two launches:
//  1. prepare: one block per (span token, unit), a unit being one q or k head (conv + SiLU, then
//     the l2 normalisation, q also scaled) or one v head (conv + SiLU, plus that head's gates g and
//     beta). Row i of a span reads its conv window from rows i-K+1..i of the same span and, for
//     the first K-1 rows, from the span's conv state, which is exactly the window the sequential
//     per-token step sees; so every row is computed in parallel with the sequential bits. Output:
//     a prepared row [q | k | v | g | beta] per input row (device scratch).
//  2. recurrence: one block per (span, value head, tile of kTile value columns); the tile's state
//     columns live in registers for the whole span and the block walks the span's tokens in order
//     (the next token's q, k, v, g, beta are prefetched while the current one is computed). The
//     same launch moves each span's conv state to its last K-1 inputs (launch 1 has finished
//     reading the old state by then: stream order).
// Numerics are the CPU's operation for operation (kernels/cpu/gated_delta.cpp, norm.cpp): the
// conv taps in j order with FMAs, the ported exp/log polynomials, every sum over a head dimension
// in the 16-lane schedule of kernels/schedule.h (lane = index mod 16, FMAs in increasing index,
// zero padding to a multiple of 16, the fixed fold 8, 4, 2, 1). Nothing depends on T, on the
// span's position in the call, on the other spans, or on the column tiling (columns of the delta
// rule are independent). So the GPU should give the CPU's bits, which the tests report (they
// assert a tolerance only).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;

// detail::scratch slot of the prepared rows (linear uses 0, attention 1).
constexpr int kScratchSlot = 3;
constexpr int kMaxHeadDim = 128;  // dk limit (state rows per thread are a template parameter)
constexpr int kPrepThreads = 128;
constexpr int kGroup = 4;  // threads per value column in the recurrence (4 of the 16 lanes each)
constexpr int kTile = 16;         // value columns per recurrence block
constexpr int kStepThreads = kTile * kGroup;
constexpr int kStageMax = 2 * kMaxHeadDim + kTile + 2;  // q | k | v tile | g | beta
constexpr int kStageLoads = (kStageMax + kStepThreads - 1) / kStepThreads;
constexpr int kNormThreads = 128;  // gated_rms_norm: one warp per row
constexpr int kCounterSlot = 5;    // detail::scratch slot of the recurrence's (span, head) counters
constexpr int64_t kNormInTailMaxTokens = 8;

// LOCKSTEP_CUDA_DELTANET_NORM=0: the gated norm as its own launch (an A/B of the two forms).
bool norm_in_tail() {
  static const bool on = [] {
    const char* v = std::getenv("LOCKSTEP_CUDA_DELTANET_NORM");
    return !(v && v[0] == '0' && v[1] == 0);
  }();
  return on;
}

// kernels::log1p_f32 and softplus_f32 (math.h).
__device__ __forceinline__ float log1p_f32(float u) {
  const float w = __fadd_rn(1.0f, u);
  if (w == 1.0f) return u;
  return __fmul_rn(log_f32(w), __fdiv_rn(u, __fsub_rn(w, 1.0f)));
}
__device__ __forceinline__ float softplus_f32(float x) {
  return x > 20.0f ? x : log1p_f32(exp_f32(x));
}

// Launch 1. Grid: x = unit + units * token block, y = span. Units: [0, 2nk) the q heads then the
// k heads, [2nk, 2nk + nv) the v heads (which also write their gates). Token blocks stride over
// the span's tokens, so a span longer than the grid is still covered (max_span_tokens is only a
// launch size).
__global__ void __launch_bounds__(kPrepThreads)
    deltanet_prepare_kernel(const float* __restrict__ conv_w, const float* __restrict__ A_log,
                            const float* __restrict__ dt_bias, const float* __restrict__ inputs,
                            const DeltaNetSpan* __restrict__ spans, int nk, int nv, int dk, int dv,
                            int K, float q_scale, float* __restrict__ prepared) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  __shared__ float head[kMaxHeadDim];
  __shared__ float inv_norm;
  const int units = 2 * nk + nv;
  const int unit = static_cast<int>(blockIdx.x % units);
  const int64_t tok_blocks = gridDim.x / units;
  const DeltaNetSpan sp = spans[blockIdx.y];
  const int64_t KD = static_cast<int64_t>(nk) * dk, C = 2 * KD + static_cast<int64_t>(nv) * dv;
  const int64_t TI = C + 2 * nv, P = C + 2 * nv;
  const int S = K - 1;
  const bool qk = unit < 2 * nk;
  const int width = qk ? dk : dv;
  const int64_t base = qk ? static_cast<int64_t>(unit) * dk
                          : 2 * KD + static_cast<int64_t>(unit - 2 * nk) * dv;

  for (int64_t i = blockIdx.x / units; i < sp.n; i += tok_blocks) {
    const int64_t row = sp.first + i;
    float* out = prepared + row * P;
    // Causal conv1d + SiLU, window = [state | previous rows of the span | this row].
    for (int d = threadIdx.x; d < width; d += kPrepThreads) {
      const int64_t c = base + d;
      const float* wc = conv_w + c * K;
      float acc = 0.0f;
      for (int j = 0; j < K; ++j) {
        const int64_t rel = i - S + j;  // this tap's input, relative to the span's first row
        const float x = rel >= 0 ? inputs[(sp.first + rel) * TI + c]
                                 : sp.conv_state[c * S + (i + j)];
        acc = __fmaf_rn(wc[j], x, acc);
      }
      const float y = silu_f32(acc);
      if (qk)
        head[d] = y;
      else
        out[c] = y;
    }
    if (!qk) {
      if (threadIdx.x == 0) {
        const int h = unit - 2 * nk;
        const float a = inputs[row * TI + C + h], b = inputs[row * TI + C + nv + h];
        out[C + h] = __fmul_rn(-exp_f32(A_log[h]), softplus_f32(__fadd_rn(a, dt_bias[h])));
        out[C + nv + h] = sigmoid_f32(b);
      }
      continue;  // block-uniform
    }
    __syncthreads();
    // Sum of squares in the 16-lane schedule (warp 0; both half-warps compute the same lanes).
    if (threadIdx.x < 32) {
      const int lane = threadIdx.x & 15;
      const int padded = (dk + 15) / 16 * 16;
      float s = 0.0f;
      for (int d = lane; d < padded; d += 16) {
        const float x = d < dk ? head[d] : 0.0f;
        s = __fmaf_rn(x, x, s);
      }
#pragma unroll
      for (int o = 8; o > 0; o >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, o));
      if (threadIdx.x == 0) inv_norm = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(s, 1e-6f)));
    }
    __syncthreads();
    const float inv = inv_norm;
    const bool is_q = unit < nk;
    for (int d = threadIdx.x; d < dk; d += kPrepThreads) {
      const float y = __fmul_rn(head[d], inv);
      out[base + d] = is_q ? __fmul_rn(y, q_scale) : y;
    }
    __syncthreads();  // head[] and inv_norm are rewritten by the next token
  }
}

// Row x (D floats) normalised and gated into y by one warp: lanes 0..15 (and, identically,
// 16..31) sum x[d]^2 for d = lane mod 16 + 16i with FMAs (zero padding to a multiple of 16), the
// fixed fold, then y = ((x * inv) * w) * silu(z), inv = 1 / sqrt(sum / D + eps):
// kernels::gated_rms_norm's order. y may alias x. L2_ONLY: x is read around the L1 (the
// recurrence's tail reads rows other blocks of its launch wrote).
template <bool L2_ONLY>
__device__ __forceinline__ void gated_rms_norm_row(const float* xr, const float* __restrict__ zr,
                                                   int64_t D, const float* __restrict__ w,
                                                   float eps, float* yr, int lane) {
  auto load = [&](int64_t d) {
    if constexpr (L2_ONLY) return __ldcg(xr + d);
    else return xr[d];
  };
  const int64_t padded = (D + 15) / 16 * 16;
  float s = 0.0f;
  for (int64_t d = lane & 15; d < padded; d += 16) {
    const float v = d < D ? load(d) : 0.0f;
    s = __fmaf_rn(v, v, s);
  }
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, o));
  // Every lane's reads of x are done (the shuffles consumed them): y may alias x.
  __syncwarp();
  const float mean = __fdiv_rn(s, static_cast<float>(D));
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
  for (int64_t d = lane; d < D; d += 32)
    yr[d] = __fmul_rn(__fmul_rn(__fmul_rn(load(d), inv), w[d]), silu_f32(zr[d]));
}

// Folds a thread's 4 local lanes (global lanes g, g+4, g+8, g+12 of its column) and its 3
// partners' in the schedule's tree: s=8 and s=4 inside the thread, s=2 and s=1 across the group
// (a + b == b + a bit for bit, so every thread of the group ends with lane 0's value).
__device__ __forceinline__ float fold_group(const float (&l)[4]) {
  float a = __fadd_rn(l[0], l[2]);
  const float b = __fadd_rn(l[1], l[3]);
  a = __fadd_rn(a, b);
  a = __fadd_rn(a, __shfl_xor_sync(0xffffffffu, a, 2));
  a = __fadd_rn(a, __shfl_xor_sync(0xffffffffu, a, 1));
  return a;
}

// Launch 2. Grid: x = head * tiles + tile, y = span. Thread (column c = v0 + tid / 4, g = tid % 4)
// holds state rows k = g + 4r (r < R, k < dk) of column c: lane (k mod 16) = g + 4 (r mod 4).
// With counters (a decode step's call, deltanet_step's norm): once its outputs are stored, each
// block counts itself in on its (span, head) counter, and the last of the head's column tiles
// (which then sees every tile's columns: each fenced its stores before counting, and the last
// fences after) runs gated_rms_norm over the head's rows of the span, in place, with the norm
// launch's row function (its warps take the span's tokens in turn), then zeroes the counter.
template <int R>
__global__ void __launch_bounds__(kStepThreads)
    deltanet_recur_kernel(const float* __restrict__ inputs, const DeltaNetSpan* __restrict__ spans,
                          int nk, int nv, int dk, int dv, int K,
                          const float* __restrict__ prepared, float* core,
                          const float* __restrict__ z, const float* __restrict__ norm_w,
                          float eps, int* __restrict__ counters) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  __shared__ float stage[2][kStageMax];
  const DeltaNetSpan sp = spans[blockIdx.y];
  if (sp.n <= 0) return;  // block-uniform
  const int tiles = (dv + kTile - 1) / kTile;
  const int h = static_cast<int>(blockIdx.x) / tiles, tile = static_cast<int>(blockIdx.x) % tiles;
  const int kh = h / (nv / nk);
  const int64_t KD = static_cast<int64_t>(nk) * dk, VD = static_cast<int64_t>(nv) * dv;
  const int64_t C = 2 * KD + VD, TI = C + 2 * nv, P = C + 2 * nv;
  const int tid = threadIdx.x, g = tid % kGroup, v0 = tile * kTile;
  const int c = v0 + tid / kGroup;
  const bool active = c < dv;
  const int padded = (dk + 15) / 16 * 16;

  // The span's conv state becomes its last K-1 inputs: element j of [state | x_0 .. x_{n-1}]
  // index n + j. In place per channel, j ascending: index n + j > j is not yet overwritten.
  const int S = K - 1;
  if (S > 0) {
    const int64_t nthreads = static_cast<int64_t>(gridDim.x) * kStepThreads;
    for (int64_t ch = static_cast<int64_t>(blockIdx.x) * kStepThreads + tid; ch < C;
         ch += nthreads) {
      float* st = sp.conv_state + ch * S;
      for (int j = 0; j < S; ++j) {
        const int64_t idx = static_cast<int64_t>(sp.n) + j;
        st[j] = idx < S ? st[idx] : inputs[(sp.first + idx - S) * TI + ch];
      }
    }
  }

  float* state = sp.delta_state + static_cast<int64_t>(h) * dk * dv;
  float s[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int k = g + kGroup * r;
    s[r] = active && k < dk ? state[static_cast<int64_t>(k) * dv + c] : 0.0f;
  }

  // Staging per token: q[dk] | k[dk] | v[kTile] | g | beta.
  const int L = 2 * dk + kTile + 2;
  auto load = [&](int64_t row, float (&pre)[kStageLoads]) {
    const float* pr = prepared + row * P;
#pragma unroll
    for (int j = 0; j < kStageLoads; ++j) {
      const int e = tid + j * kStepThreads;
      float x = 0.0f;
      if (e < dk)
        x = pr[static_cast<int64_t>(kh) * dk + e];
      else if (e < 2 * dk)
        x = pr[KD + static_cast<int64_t>(kh) * dk + (e - dk)];
      else if (e < 2 * dk + kTile) {
        const int v = v0 + (e - 2 * dk);
        if (v < dv) x = pr[2 * KD + static_cast<int64_t>(h) * dv + v];
      } else if (e == 2 * dk + kTile)
        x = pr[C + h];
      else if (e == 2 * dk + kTile + 1)
        x = pr[C + nv + h];
      pre[j] = x;
    }
  };
  auto store = [&](int buf, const float (&pre)[kStageLoads]) {
#pragma unroll
    for (int j = 0; j < kStageLoads; ++j) {
      const int e = tid + j * kStepThreads;
      if (e < L) stage[buf][e] = pre[j];
    }
  };

  float pre[kStageLoads];
  load(sp.first, pre);
  store(0, pre);
  if (sp.n > 1) load(sp.first + 1, pre);
  __syncthreads();

  for (int i = 0; i < sp.n; ++i) {
    const int buf = i & 1;
    // Buffer buf ^ 1 was last read in iteration i - 1, which ended with a barrier.
    if (i + 1 < sp.n) store(buf ^ 1, pre);
    if (i + 2 < sp.n) load(sp.first + i + 2, pre);

    const float* sq = stage[buf];
    const float* sk = sq + dk;
    const float vv = sq[2 * dk + (c - v0)];
    const float decay = exp_f32(sq[2 * dk + kTile]);
    const float beta = sq[2 * dk + kTile + 1];

    // state *= exp(g); kv_mem = sum_k state[k][c] * k[k].
    float lanes[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int k = g + kGroup * r;
      if (k < dk) {
        s[r] = __fmul_rn(s[r], decay);
        lanes[r & 3] = __fmaf_rn(s[r], sk[k], lanes[r & 3]);
      } else if (k < padded) {
        lanes[r & 3] = __fadd_rn(lanes[r & 3], 0.0f);  // the schedule's zero padding
      }
    }
    const float kv_mem = fold_group(lanes);
    const float delta = __fmul_rn(__fsub_rn(vv, kv_mem), beta);

    // state[k][c] += k[k] * delta; out = sum_k state[k][c] * q[k].
#pragma unroll
    for (int r = 0; r < 4; ++r) lanes[r] = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int k = g + kGroup * r;
      if (k < dk) {
        s[r] = __fadd_rn(s[r], __fmul_rn(sk[k], delta));
        lanes[r & 3] = __fmaf_rn(s[r], sq[k], lanes[r & 3]);
      } else if (k < padded) {
        lanes[r & 3] = __fadd_rn(lanes[r & 3], 0.0f);
      }
    }
    if (core != nullptr) {
      const float o = fold_group(lanes);
      if (active && g == 0) core[(sp.first + i) * VD + static_cast<int64_t>(h) * dv + c] = o;
    }
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int k = g + kGroup * r;
    if (active && k < dk) state[static_cast<int64_t>(k) * dv + c] = s[r];
  }

  if (counters != nullptr) {
    __threadfence();
    __syncthreads();  // every warp's columns stored and fenced before the count
    int* counter = counters + static_cast<int64_t>(blockIdx.y) * nv + h;
    const bool last = __syncthreads_or(tid == 0 && atomicAdd(counter, 1) == tiles - 1);
    if (!last) return;  // block-uniform
    __threadfence();
    for (int i = tid / 32; i < sp.n; i += kStepThreads / 32) {
      const int64_t row = (static_cast<int64_t>(sp.first) + i) * nv + h;
      gated_rms_norm_row<true>(core + row * dv, z + row * dv, dv, norm_w, eps, core + row * dv,
                               tid & 31);
    }
    if (tid == 0) *counter = 0;
  }
}

// One warp per row (gated_rms_norm_row).
__global__ void __launch_bounds__(kNormThreads)
    gated_rms_norm_kernel(const float* x, const float* __restrict__ z, int64_t rows, int64_t D,
                          const float* __restrict__ w, float eps, float* y) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kNormThreads / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // warp-uniform
  gated_rms_norm_row<false>(x + row * D, z + row * D, D, w, eps, y + row * D, threadIdx.x & 31);
}

// One thread per destination element of a token: columns [0, TI) of inputs, then [0, VD) of z,
// each read from its place in qkvz or ba (Backend::deltanet_regroup's layout).
__global__ void deltanet_regroup_kernel(const float* __restrict__ qkvz,
                                        const float* __restrict__ ba, int64_t T, int nk, int nv,
                                        int dk, int dv, float* __restrict__ inputs,
                                        float* __restrict__ z) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t r = nv / nk, KD = static_cast<int64_t>(nk) * dk, VD = static_cast<int64_t>(nv) * dv;
  const int64_t C = 2 * KD + VD, TI = C + 2 * nv, grp = 2 * dk + 2 * r * dv, QZ = nk * grp;
  const int64_t width = TI + VD;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < T * width;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / width, c = i % width;
    const float* q = qkvz + t * QZ;
    const float* b = ba + t * 2 * nv;
    float v;
    if (c < KD) v = q[c / dk * grp + c % dk];                           // q
    else if (c < 2 * KD) v = q[(c - KD) / dk * grp + dk + (c - KD) % dk];  // k
    else if (c < C) {                                                  // v
      const int64_t j = c - 2 * KD;
      v = q[j / (r * dv) * grp + 2 * dk + j % (r * dv)];
    } else if (c < C + nv) v = b[(c - C) / r * 2 * r + r + (c - C) % r];  // a
    else if (c < TI) v = b[(c - C - nv) / r * 2 * r + (c - C - nv) % r];   // b
    else {                                                             // z
      const int64_t j = c - TI;
      v = q[j / (r * dv) * grp + 2 * dk + r * dv + j % (r * dv)];
      z[t * VD + j] = v;
      continue;
    }
    inputs[t * TI + c] = v;
  }
}

}  // namespace

void deltanet_regroup(const DeltaNetShape& s, const float* qkvz, const float* ba, int64_t T,
                      float* inputs, float* z) {
  if (T <= 0) return;
  if (s.nk <= 0 || s.nv <= 0 || s.nv % s.nk != 0 || s.dk <= 0 || s.dv <= 0)
    fail("CUDA deltanet_regroup: invalid shape nk=", s.nk, " nv=", s.nv, " dk=", s.dk, " dv=",
         s.dv);
  constexpr int kThreads = 256;
  const int64_t n = T * (s.token_inputs() + s.value_dim());
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 4096));
  launch("deltanet_regroup_kernel", deltanet_regroup_kernel, blocks, kThreads, 0, qkvz, ba, T,
         static_cast<int>(s.nk), static_cast<int>(s.nv), static_cast<int>(s.dk),
         static_cast<int>(s.dv), inputs, z);
}

void deltanet_step(const DeltaNetShape& s, const float* conv_w, const float* A_log,
                   const float* dt_bias, const float* inputs, int64_t T, const DeltaNetSpan* spans,
                   int64_t n_spans, int64_t max_span_tokens, float* core,
                   const DeltaNetNorm* norm) {
  if (T <= 0 || n_spans <= 0 || max_span_tokens <= 0) return;
  if (s.nk <= 0 || s.nv <= 0 || s.nv % s.nk != 0 || s.dk <= 0 || s.dv <= 0 || s.K < 1)
    fail("CUDA deltanet_step: invalid shape nk=", s.nk, " nv=", s.nv, " dk=", s.dk, " dv=", s.dv,
         " K=", s.K);
  if (s.dk > kMaxHeadDim) fail("CUDA deltanet_step: key head dim ", s.dk, " > ", kMaxHeadDim);
  if (n_spans > 65535) fail("CUDA deltanet_step: ", n_spans, " spans in one call (max 65535)");
  const int64_t units = 2 * s.nk + s.nv;
  const int64_t tiles = (s.dv + kTile - 1) / kTile;
  if (units * max_span_tokens > 0x7fffffff || s.nv * tiles > 0x7fffffff)
    fail("CUDA deltanet_step: grid too large");
  const int64_t P = s.conv_dim() + 2 * s.nv;
  auto* prepared =
      static_cast<float*>(scratch(kScratchSlot, static_cast<size_t>(T * P) * sizeof(float)));
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(s.dk));
  const int nk = static_cast<int>(s.nk), nv = static_cast<int>(s.nv), dk = static_cast<int>(s.dk),
            dv = static_cast<int>(s.dv), K = static_cast<int>(s.K);

  const dim3 grid1(static_cast<unsigned>(units * max_span_tokens), static_cast<unsigned>(n_spans));
  launch("deltanet_prepare_kernel", deltanet_prepare_kernel, grid1, kPrepThreads, 0, conv_w, A_log, dt_bias, inputs, spans, nk, nv, dk, dv, K, q_scale, prepared);

  const dim3 grid2(static_cast<unsigned>(s.nv * tiles), static_cast<unsigned>(n_spans));
  // The norm in the recurrence's tail for a decode step's spans (a head's tail normalises all the
  // span's rows of that head, so long spans keep the norm launch); counters: one per (span, head).
  const bool fuse_norm = norm && core && max_span_tokens <= kNormInTailMaxTokens && norm_in_tail();
  const float* z = fuse_norm ? norm->z : nullptr;
  const float* norm_w = fuse_norm ? norm->w : nullptr;
  const float eps = fuse_norm ? norm->eps : 0.0f;
  int* counters = fuse_norm ? static_cast<int*>(scratch(kCounterSlot,
                                                        static_cast<size_t>(n_spans * nv) * sizeof(int), true))
                            : nullptr;
  // State rows per thread: padded / 4, rounded up to 4, 8, 16 or 32.
  const int padded = (dk + 15) / 16 * 16;
  auto go = [&](auto kernel) {
    launch("deltanet_recur_kernel", kernel, grid2, kStepThreads, 0, inputs, spans, nk, nv, dk, dv,
           K, prepared, core, z, norm_w, eps, counters);
  };
  if (padded <= 16) go(deltanet_recur_kernel<4>);
  else if (padded <= 32) go(deltanet_recur_kernel<8>);
  else if (padded <= 64) go(deltanet_recur_kernel<16>);
  else go(deltanet_recur_kernel<32>);
  if (norm && core && !fuse_norm) gated_rms_norm(core, norm->z, T * s.nv, s.dv, norm->w, norm->eps, core);
}

void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t D, const float* w,
                    float eps, float* y) {
  if (rows <= 0 || D <= 0) return;
  constexpr int per_block = kNormThreads / 32;
  launch("gated_rms_norm_kernel", gated_rms_norm_kernel, blocks_for(rows, per_block), kNormThreads, 0, x, z, rows, D, w, eps, y);
}

}  // namespace lockstep::kernels::cuda
