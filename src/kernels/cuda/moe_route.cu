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
#include "kernels/cuda/moe_route_one.cuh"

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;

constexpr int kRouteWarps = 4;  // tokens per block (one warp each)
constexpr int kLanes16 = 16;    // the host's sum lanes (kernels::kLanes)

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

// A decode step's single token (T = 1) routed and grouped by one warp (moe_route_one.cuh).
template <int PER>
__global__ void __launch_bounds__(32)
    moe_route_group_one_kernel(const float* __restrict__ logits, int E, int k, bool normalize,
                               const float* __restrict__ expert_scale,
                               int32_t* __restrict__ experts, float* __restrict__ weights,
                               bool shared, int32_t* __restrict__ source,
                               int32_t* __restrict__ slot, int32_t* __restrict__ groups) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  route_group_one<PER>(logits, E, k, normalize, expert_scale, experts, weights, shared, source,
                       slot, groups);
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
