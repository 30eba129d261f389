// linear_route_group (cuda_ops.h): an MoE layer's router linear (with the shared expert's gate
// when the layer has one) and the routing and grouping of a single token, in one launch.
//
// The blocks run the skinny linear's body unchanged (linear_skinny.cuh: each logit bitwise its
// linear()), then count themselves in on a counter in zeroed scratch: every block's threads fence
// their stores, the block meets, and its thread 0 adds one. The block that takes the last count
// has every logit visible to it (the other blocks fenced before counting) and routes and groups
// the token with one warp (route_group_one, moe_route_one.cuh: the one-token launch's own code),
// then sets the counter back to zero for the next launch (a recorded graph replays it). So the
// outputs are bitwise linear_multi then moe_route_group, one launch fewer per MoE layer of a
// decode step; the counting costs a fence, a barrier and an atomic in each of the launch's ~17
// blocks, which only stream the router's rows.
#include "kernels/cuda/linear_internal.cuh"
#include "kernels/cuda/linear_skinny.cuh"
#include "kernels/cuda/moe_route_one.cuh"

#include <cstdlib>
#include <string>

#include "kernels/cuda/cuda_ops.h"

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;
using namespace lin;

constexpr int kCounterSlot = 7;  // detail::scratch slot of the launch's block counter
constexpr int kMaxPer = 16;      // experts per lane: E <= 512
using RouterCfg = SkCfg<1, 128, 4>;  // 16 rows a block: the most blocks for a router's few rows

struct RouteArgs {
  const float* expert_scale;
  int32_t* experts;
  float* weights;
  int32_t* source;
  int32_t* slot;
  int32_t* groups;
  int* counter;
  int E, k;
  bool normalize, shared;
};

template <int S, int PER>
__global__ void __launch_bounds__(Skinny<1, true, S, RouterCfg>::kThreads,
                                  Skinny<1, true, S, RouterCfg>::kMinBlocks)
    linear_route_kernel(const __grid_constant__ Outs outs, const float* __restrict__ x, int K,
                        int Ks, const __grid_constant__ RouteArgs r) {
  skinny_body<1, true, S, RouterCfg, 0>(outs, x, 1, K, Ks, nullptr, 5, kPairBF16);
  __threadfence();  // this thread's logits, before the block's count
  const bool last = __syncthreads_or(
      threadIdx.x == 0 && atomicAdd(r.counter, 1) == static_cast<int>(gridDim.x) - 1);
  if (!last) return;
  __threadfence();  // the other blocks' logits, after their counts
  if (threadIdx.x < 32)
    route_group_one<PER>(outs.y[0], r.E, r.k, r.normalize, r.expert_scale, r.experts, r.weights,
                         r.shared, r.source, r.slot, r.groups);
  if (threadIdx.x == 0) *r.counter = 0;
}

// LOCKSTEP_CUDA_ROUTER_ROUTE=0: the router linear and the routing as their own launches (the same
// bits; an A/B).
bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("LOCKSTEP_CUDA_ROUTER_ROUTE");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

}  // namespace

bool linear_route_group_fits(const float* x, const LinearOut* outs, int64_t n, int64_t E,
                             int64_t k) {
  if (!enabled() || n < 1 || n > kMaxOuts || E > 32 * kMaxPer || k < 1 || k > 32 || k > E)
    return false;
  if (outs[0].w->rows != E || reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;
  const int64_t K = outs[0].w->cols;
  const int S = split_count(outs[0].w->rows, K);
  for (int64_t i = 0; i < n; ++i) {
    const Weight& w = *outs[i].w;
    // BF16 weights of one launch (one K, one S), as linear_multi would put them in one launch.
    if (w.quant != QuantFormat::None || w.dtype != DType::BF16 || w.cols != K || K % 16 != 0 ||
        split_count(w.rows, K) != S || reinterpret_cast<uintptr_t>(w.data) % 16 != 0)
      return false;
  }
  return Skinny<1, true, 4, RouterCfg>::smem(1) <= smem_optin();
}

void linear_route_group(const float* x, const LinearOut* outs, int64_t n, int64_t E, int64_t k,
                        bool normalize, const float* expert_scale, bool shared, int32_t* experts,
                        float* weights, int32_t* source, int32_t* slot, int32_t* groups) {
  if (!linear_route_group_fits(x, outs, n, E, k))
    fail("CUDA linear_route_group: the router (", outs[0].w->rows, "x", outs[0].w->cols,
         ") and its ", n - 1, " other weights do not fit one launch with the routing of ", E,
         " experts, top ", k);
  const int64_t K = outs[0].w->cols;
  const int S = split_count(outs[0].w->rows, K);
  Group g;
  for (int64_t i = 0; i < n; ++i)
    g.add(static_cast<const uint16_t*>(outs[i].w->data), outs[i].bias, outs[i].y,
          static_cast<int>(outs[i].w->rows));
  auto go = [&](auto s, auto per) {
    constexpr int SS = decltype(s)::value, PER = decltype(per)::value;
    using C = Skinny<1, true, SS, RouterCfg>;
    const int bytes = C::smem(1);
    constexpr auto kernel = linear_route_kernel<SS, PER>;
    allow_smem_max<kernel>();
    RouteArgs r{expert_scale, experts, weights, source, slot, groups,
                static_cast<int*>(scratch(kCounterSlot, sizeof(int), true)),
                static_cast<int>(E), static_cast<int>(k), normalize, shared};
    launch("linear_route_kernel", kernel, dim3(g.blocks(C::kRows)), C::kThreads, bytes,
           g.table(C::kRows), x, static_cast<int>(K), split_len(K, SS), r);
  };
  auto with_s = [&](auto per) {
    if (S == 4) return go(std::integral_constant<int, 4>{}, per);
    if (S == 2) return go(std::integral_constant<int, 2>{}, per);
    return go(std::integral_constant<int, 1>{}, per);
  };
  if (E <= 32) with_s(std::integral_constant<int, 1>{});
  else if (E <= 64) with_s(std::integral_constant<int, 2>{});
  else if (E <= 128) with_s(std::integral_constant<int, 4>{});
  else if (E <= 256) with_s(std::integral_constant<int, 8>{});
  else with_s(std::integral_constant<int, kMaxPer>{});
}

}  // namespace lockstep::kernels::cuda
