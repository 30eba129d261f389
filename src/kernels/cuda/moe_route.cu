// Mixture-of-experts routing and grouping on the device (cuda_ops.h: moe_route, moe_group), so an
// MoE step needs no host read and can be recorded into a CUDA graph.
//
// moe_route is route_tokens (models/moe_routing.cpp) operation for operation, so the expert ids
// and weights are bitwise the host's: per token, the max by fmaxf (order-free: fmax is exact and
// ignores NaN), x - max through exp_f32 (common.cuh, kernels::exp_f32's algorithm and order),
// the 16-lane sum of kernels::softmax (element i into lane i % 16 in increasing i, then the fixed
// fold tree of schedule.h), 1 / sum, times each element; NaN probabilities become -1; the top k
// under the host's strict total order (probability descending, ties to the lowest id), rank by
// rank; the renormalising sum added in rank order from 0; p / sum (or p); then, for Gemma 4,
// times the expert's scale. The order is strict and total, so the k-th pick is unique and the
// warp reduction that finds it may combine lanes in any order.
//
// moe_group is group_by_expert (models/moe_layer.cpp): counts per expert, the first grouped row of
// each expert (experts in id order), and within an expert the assignments i = t * k + j in
// increasing i (a row's rank is the number of earlier assignments to its expert, counted, not
// raced for), so the permutation is the host's. It also lists the active experts in id order
// (the groups table the grouped expert linear reads). With `shared`, the table ends with one more
// group, expert E over every token in order (grouped rows n .. n + T - 1, source t): a shared
// expert of the routed experts' shape then runs in the same grouped launches.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;

constexpr int kRouteWarps = 4;  // tokens per block (one warp each)
constexpr int kLanes16 = 16;    // the host's sum lanes (kernels::kLanes)

// true when (pa, a) ranks before (pb, b): probability descending, ties to the lowest id.
__device__ __forceinline__ bool ranks_before(float pa, int a, float pb, int b) {
  return pa > pb || (pa == pb && a < b);
}

// Token t's routing by one warp (lane `lane`), in p: E + 32 floats of shared memory of its own.
__device__ void route_token(float* p, int lane, const float* __restrict__ logits, int t, int E,
                            int k, bool normalize, const float* __restrict__ expert_scale,
                            int32_t* __restrict__ experts, float* __restrict__ weights) {
  float* lanes = p + E;  // 16 partial sums, then the k chosen probabilities
  const float* row = logits + static_cast<int64_t>(t) * E;
  float mx = -INFINITY;
  for (int i = lane; i < E; i += 32) mx = fmaxf(mx, row[i]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  for (int i = lane; i < E; i += 32) p[i] = exp_f32(__fsub_rn(row[i], mx));
  __syncwarp();
  if (lane < kLanes16) {
    float s = 0.0f;
    for (int i = lane; i < E; i += kLanes16) s = __fadd_rn(s, p[i]);
    lanes[lane] = s;
  }
  __syncwarp();
  if (lane == 0) {  // fold_lanes: lane[l] += lane[l + s] for s = 8, 4, 2, 1
    for (int s = kLanes16 / 2; s >= 1; s /= 2)
      for (int l = 0; l < s; ++l) lanes[l] = __fadd_rn(lanes[l], lanes[l + s]);
  }
  __syncwarp();
  const float inv = __fdiv_rn(1.0f, lanes[0]);
  for (int i = lane; i < E; i += 32) {
    const float v = __fmul_rn(p[i], inv);
    p[i] = v != v ? -1.0f : v;  // a NaN ranks last (route_tokens)
  }
  __syncwarp();
  // Rank j: the best expert not yet taken (taken ones are marked by a probability of -2, below
  // every real one, -1 included). Lane 0 records the pick.
  int32_t* ids = experts + static_cast<int64_t>(t) * k;
  for (int j = 0; j < k; ++j) {
    float bp = -3.0f;
    int bi = E;
    for (int i = lane; i < E; i += 32)
      if (ranks_before(p[i], i, bp, bi)) bp = p[i], bi = i;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float op = __shfl_xor_sync(0xffffffffu, bp, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ranks_before(op, oi, bp, bi)) bp = op, bi = oi;
    }
    if (lane == 0) {
      ids[j] = bi;
      lanes[j] = bp;
      p[bi] = -2.0f;
    }
    __syncwarp();
  }
  if (lane == 0) {
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum = __fadd_rn(sum, lanes[j]);
    float* w = weights + static_cast<int64_t>(t) * k;
    for (int j = 0; j < k; ++j) {
      float v = normalize ? __fdiv_rn(lanes[j], sum) : lanes[j];
      if (expert_scale) v = __fmul_rn(v, expert_scale[ids[j]]);
      w[j] = v;
    }
  }
}

__global__ void moe_route_kernel(const float* __restrict__ logits, int T, int E, int k,
                                 bool normalize, const float* __restrict__ expert_scale,
                                 int32_t* __restrict__ experts, float* __restrict__ weights) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  extern __shared__ float sm[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t = blockIdx.x * kRouteWarps + warp;
  if (t >= T) return;  // whole warps leave; no block-wide barrier below
  route_token(sm + warp * (E + 32), lane, logits, t, E, k, normalize, expert_scale, experts,
              weights);
}

constexpr int kGroupThreads = 1024;
// The fused route + group launch: one block, so for a step's few tokens, within the shared memory
// every device gives without opting in.
constexpr int64_t kMoeFusedMaxTokens = 64;
constexpr int64_t kFusedMinWarps = 4;
constexpr size_t kMoeFusedMaxSmem = 48 << 10;
constexpr int kOneTokenMaxPer = 16;  // moe_route_group_one_kernel: E <= 512

// The grouping of n = T * k assignments of E experts by the whole block (gs: 3 E ints of shared
// memory), plus the shared expert's group (E, n, T) last when `shared`.
// experts is not __restrict__: the fused kernel reads what its own warps wrote (no
// non-coherent loads).
__device__ void group_rows(int32_t* gs, const int32_t* experts, int n, int k, int E, bool shared,
                           int32_t* __restrict__ source, int32_t* __restrict__ slot,
                           int32_t* __restrict__ groups) {
  int32_t* count = gs;          // [E]
  int32_t* first = gs + E;      // [E]
  int32_t* active = gs + 2 * E; // [E]: the expert's index among the active ones
  for (int e = threadIdx.x; e < E; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(&count[experts[i]], 1);
  __syncthreads();
  // Exclusive prefix sums of the counts and of the active flags, in expert order: warp 0, each
  // lane a contiguous chunk of experts, then a scan over the lanes' totals.
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x, per = (E + 31) / 32;
    const int e0 = min(E, lane * per), e1 = min(E, e0 + per);
    int s = 0, a = 0;
    for (int e = e0; e < e1; ++e) s += count[e], a += count[e] > 0;
    // Exclusive scan over the lanes by shuffles: integer sums, so exact in any order.
    int is = s, ia = a;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int us = __shfl_up_sync(0xffffffffu, is, o), ua = __shfl_up_sync(0xffffffffu, ia, o);
      if (lane >= o) is += us, ia += ua;
    }
    if (lane == 31) {
      groups[0] = ia + shared;  // active experts (the shared one after the routed ones)
      if (shared) {
        int32_t* g = groups + 1 + 3 * ia;
        g[0] = E, g[1] = n, g[2] = n / k;
      }
    }
    s = is - s, a = ia - a;
    for (int e = e0; e < e1; ++e) {
      first[e] = s, active[e] = a;
      s += count[e], a += count[e] > 0;
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x)
    if (count[e] > 0) {
      int32_t* g = groups + 1 + 3 * active[e];
      g[0] = e, g[1] = first[e], g[2] = count[e];
    }
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int e = experts[i];
    int rank = 0;
    for (int j = 0; j < i; ++j) rank += experts[j] == e;
    const int row = first[e] + rank;
    source[row] = i / k;
    slot[i] = row;
  }
  if (shared)
    for (int t = threadIdx.x; t < n / k; t += blockDim.x) source[n + t] = t;
}

// One block: n = T * k assignments of E experts.
__global__ void moe_group_kernel(const int32_t* __restrict__ experts, int n, int k, int E,
                                 bool shared, int32_t* __restrict__ source,
                                 int32_t* __restrict__ slot, int32_t* __restrict__ groups) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  extern __shared__ int32_t gs[];
  group_rows(gs, experts, n, k, E, shared, source, slot, groups);
}

// moe_route then moe_group in one block (a decode step's few tokens: one launch fewer per MoE
// layer): warp w routes tokens w, w + 32, ..., each in shared memory of its own, the block waits
// (the routing's global writes are then visible to the whole block), then groups them. The same
// functions, so the same bits as the two launches.
__global__ void moe_route_group_kernel(const float* __restrict__ logits, int T, int E, int k,
                                       bool normalize, const float* __restrict__ expert_scale,
                                       int32_t* experts, float* __restrict__ weights, bool shared,
                                       int32_t* __restrict__ source, int32_t* __restrict__ slot,
                                       int32_t* __restrict__ groups) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  extern __shared__ float sm[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  for (int t = warp; t < T; t += warps)
    route_token(sm + warp * (E + 32), lane, logits, t, E, k, normalize, expert_scale, experts,
                weights);
  __syncthreads();
  group_rows(reinterpret_cast<int32_t*>(sm), experts, T * k, k, E, shared, source, slot, groups);
}

// A decode step's single token (T = 1) routed and grouped by one warp, the probabilities in
// registers (lane l holds experts l, l + 32, ...; PER of them, E <= 32 PER): the launch every MoE
// layer of a batch-1 decode step runs, where moe_route_group_kernel spent most of its time in
// shared-memory round trips, shuffle trees and block barriers for one token. The arithmetic is
// route_token's, operation for operation:
// - the max by fmaxf over the warp and exp_f32(x - max) per expert, as route_token;
// - the 16-lane sum: lane l < 16 adds experts l, l + 16, l + 32, ... in increasing index (its own
//   register r, then lane l + 16's, fetched by a shuffle), and the xor tree over 16 lanes is the
//   fold 8, 4, 2, 1 (a + b is b + a bit for bit, so lane 0 ends with the fold's lanes[0]);
// - rank j: each lane's best untaken expert by route_token's strict order, then the warp's best
//   by two integer reductions: the largest order key (the probability's bits, monotone over the
//   values a routing holds: [0, 1] and the markers -1 and -2, below), then the lowest id with it.
//   The order is strict and total, so this is route_token's pick;
// - the renormalising sum adds the picks in rank order from 0 as they are made.
// The grouping needs no counting for one token: its k experts are distinct, each holds one row,
// and rows go in expert id order, so rank j's row is the number of picked ids below its own
// (moe_group's tables exactly: count 1, first row = active index = that number).
__device__ __forceinline__ uint32_t route_key(float p) {
  // p in [0, 1] (a -0 keyed as +0, which it equals), -1 (NaN) or -2 (taken).
  return p > 0.0f ? __float_as_uint(p) + 2u : (p == 0.0f ? 2u : (p == -1.0f ? 1u : 0u));
}

template <int PER>
__global__ void __launch_bounds__(32)
    moe_route_group_one_kernel(const float* __restrict__ logits, int E, int k, bool normalize,
                               const float* __restrict__ expert_scale,
                               int32_t* __restrict__ experts, float* __restrict__ weights,
                               bool shared, int32_t* __restrict__ source,
                               int32_t* __restrict__ slot, int32_t* __restrict__ groups) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int lane = threadIdx.x;
  constexpr unsigned kAll = 0xffffffffu;
  float p[PER];
  float mx = -INFINITY;
#pragma unroll
  for (int r = 0; r < PER; ++r) {
    const int i = lane + 32 * r;
    p[r] = i < E ? logits[i] : -INFINITY;
    if (i < E) mx = fmaxf(mx, p[r]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kAll, mx, o));
#pragma unroll
  for (int r = 0; r < PER; ++r) p[r] = exp_f32(__fsub_rn(p[r], mx));
  // Lanes 0..15 sum experts lane, lane + 16, lane + 32, ...; lanes 16..31 compute a value nobody
  // reads (their partners would be lanes 32..47).
  float s = 0.0f;
#pragma unroll
  for (int r = 0; r < PER; ++r) {
    const float hi = __shfl_down_sync(kAll, p[r], 16);
    if (lane + 32 * r < E) s = __fadd_rn(s, p[r]);
    if (lane + 16 + 32 * r < E) s = __fadd_rn(s, hi);
  }
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) s = __fadd_rn(s, __shfl_xor_sync(kAll, s, o));
  const float inv = __fdiv_rn(1.0f, __shfl_sync(kAll, s, 0));
#pragma unroll
  for (int r = 0; r < PER; ++r) {
    const float v = __fmul_rn(p[r], inv);
    p[r] = lane + 32 * r < E ? (v != v ? -1.0f : v) : -3.0f;  // -3: no expert (never picked)
  }
  int my_id = 0;
  float my_p = 0.0f, sum = 0.0f;
  for (int j = 0; j < k; ++j) {
    // This lane's best untaken expert: route_token's order (registers in increasing id).
    float bp = -3.0f;
    int bi = E;
#pragma unroll
    for (int r = 0; r < PER; ++r)
      if (ranks_before(p[r], lane + 32 * r, bp, bi)) bp = p[r], bi = lane + 32 * r;
    const uint32_t key = bi < E ? route_key(bp) : 0u;
    const uint32_t best = __reduce_max_sync(kAll, bi < E ? key + 1u : 0u);
    const int id = static_cast<int>(
        __reduce_min_sync(kAll, bi < E && key + 1u == best ? static_cast<uint32_t>(bi) : ~0u));
    const float pick = __shfl_sync(kAll, bp, id & 31);  // the winner is its lane's best
#pragma unroll
    for (int r = 0; r < PER; ++r)
      if (lane + 32 * r == id) p[r] = -2.0f;
    sum = __fadd_rn(sum, pick);
    if (lane == j) my_id = id, my_p = pick;
  }
  if (lane < k) {
    float v = normalize ? __fdiv_rn(my_p, sum) : my_p;
    if (expert_scale) v = __fmul_rn(v, expert_scale[my_id]);
    experts[lane] = my_id;
    weights[lane] = v;
  }
  int row = 0;
  for (int m = 0; m < k; ++m) row += __shfl_sync(kAll, my_id, m) < my_id;
  if (lane < k) {
    slot[lane] = row;
    source[row] = 0;
    int32_t* g = groups + 1 + 3 * row;
    g[0] = my_id, g[1] = row, g[2] = 1;
  }
  if (lane == 0) {
    groups[0] = k + shared;
    if (shared) {
      int32_t* g = groups + 1 + 3 * k;
      g[0] = E, g[1] = k, g[2] = 1;
      source[k] = 0;
    }
  }
}

// The routing kernels pick k <= 32 experts (one warp's arg-max rounds) out of E.
void check_top_k(const char* op, int64_t k, int64_t E) {
  if (k < 1 || k > E || k > 32) fail("CUDA ", op, ": k = ", k, " outside [1, min(", E, ", 32)]");
}

}  // namespace

void moe_route(const float* logits, int64_t T, int64_t E, int64_t k, bool normalize,
               const float* expert_scale, int32_t* experts, float* weights) {
  check_top_k("moe_route", k, E);
  if (E > kMoeMaxExperts) fail("CUDA moe_route: ", E, " experts (at most ", kMoeMaxExperts, ")");
  if (T <= 0) return;
  const size_t smem = static_cast<size_t>(kRouteWarps) * (E + 32) * sizeof(float);
  launch("moe_route_kernel", moe_route_kernel, blocks_for(T, kRouteWarps), 32 * kRouteWarps, smem,
         logits, static_cast<int>(T), static_cast<int>(E), static_cast<int>(k), normalize,
         expert_scale, experts, weights);
}

void moe_group(const int32_t* experts, int64_t T, int64_t k, int64_t E, int32_t* source,
               int32_t* slot, int32_t* groups, bool shared) {
  if (E > kMoeMaxExperts) fail("CUDA moe_group: ", E, " experts (at most ", kMoeMaxExperts, ")");
  if (T * k > kMoeMaxRows) fail("CUDA moe_group: ", T * k, " rows (at most ", kMoeMaxRows, ")");
  if (T <= 0) return;
  const size_t smem = static_cast<size_t>(3 * E) * sizeof(int32_t);
  launch("moe_group_kernel", moe_group_kernel, 1, kGroupThreads, smem, experts,
         static_cast<int>(T * k), static_cast<int>(k), static_cast<int>(E), shared, source, slot,
         groups);
}

void moe_route_group(const float* logits, int64_t T, int64_t E, int64_t k, bool normalize,
                     const float* expert_scale, int32_t* experts, float* weights, int32_t* source,
                     int32_t* slot, int32_t* groups, bool shared) {
  // One warp per token up to a block of kGroupThreads, at least kFusedMinWarps for the grouping:
  // a decode step's single token gets a block of 128 threads, not 1024 mostly idle ones whose
  // launch and barriers cost more than the routing (the grouping's loops stride by the block, so
  // any multiple of 32 threads gives the same tables).
  const int warps = static_cast<int>(std::clamp<int64_t>(T, kFusedMinWarps, kGroupThreads / 32));
  const size_t route_smem = static_cast<size_t>(warps) * (E + 32) * sizeof(float);
  const size_t group_smem = static_cast<size_t>(3 * E) * sizeof(int32_t);
  if (T > kMoeFusedMaxTokens || std::max(route_smem, group_smem) > kMoeFusedMaxSmem) {
    moe_route(logits, T, E, k, normalize, expert_scale, experts, weights);
    moe_group(experts, T, k, E, source, slot, groups, shared);
    return;
  }
  check_top_k("moe_route_group", k, E);
  if (T <= 0) return;
  if (T == 1 && E <= 32 * kOneTokenMaxPer) {
    auto go = [&](auto kernel) {
      launch("moe_route_group_one_kernel", kernel, 1, 32, 0, logits, static_cast<int>(E),
             static_cast<int>(k), normalize, expert_scale, experts, weights, shared, source, slot,
             groups);
    };
    if (E <= 32) go(moe_route_group_one_kernel<1>);
    else if (E <= 64) go(moe_route_group_one_kernel<2>);
    else if (E <= 128) go(moe_route_group_one_kernel<4>);
    else if (E <= 256) go(moe_route_group_one_kernel<8>);
    else go(moe_route_group_one_kernel<kOneTokenMaxPer>);
    return;
  }
  launch("moe_route_group_kernel", moe_route_group_kernel, 1, 32 * warps,
         std::max(route_smem, group_smem), logits, static_cast<int>(T), static_cast<int>(E),
         static_cast<int>(k), normalize, expert_scale, experts, weights, shared, source, slot,
         groups);
}

}  // namespace lockstep::kernels::cuda
