// A single token's MoE routing and grouping by one warp (moe_route.cu's one-token launch, and the
// router linear's last block in router_route.cu): route_tokens' arithmetic, operation for
// operation, on the probabilities in registers. Shared so that both launches run one copy.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace lockstep::kernels::cuda::detail {

// true when (pa, a) ranks before (pb, b): probability descending, ties to the lowest id.
__device__ __forceinline__ bool ranks_before(float pa, int a, float pb, int b) {
  return pa > pb || (pa == pb && a < b);
}

// A decode step's single token (T = 1) routed and grouped by one warp, the probabilities in
// registers (lane l holds experts l, l + 32, ...; PER of them, E <= 32 PER): what every MoE
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

// Called by all 32 lanes of one warp. logits are read through L2 (__ldcg): the router's last
// block reads what the launch's other blocks wrote.
template <int PER>
__device__ __forceinline__ void route_group_one(const float* logits, int E, int k, bool normalize,
                                                const float* __restrict__ expert_scale,
                                                int32_t* __restrict__ experts,
                                                float* __restrict__ weights, bool shared,
                                                int32_t* __restrict__ source,
                                                int32_t* __restrict__ slot,
                                                int32_t* __restrict__ groups) {
  const int lane = threadIdx.x & 31;
  constexpr unsigned kAll = 0xffffffffu;
  float p[PER];
  float mx = -INFINITY;
#pragma unroll
  for (int r = 0; r < PER; ++r) {
    const int i = lane + 32 * r;
    p[r] = i < E ? __ldcg(logits + i) : -INFINITY;
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

}  // namespace lockstep::kernels::cuda::detail
