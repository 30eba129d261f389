// Routing of a mixture-of-experts layer, one token at a time (../shared/DESIGN.md, "Mixture of
// experts"): softmax over the router logits, the k most probable experts in a strict total order
// (probability descending, ties to the lowest expert id), optionally renormalised to sum to 1.
// A token's routing is a pure function of its own logits row, so it never depends on which other
// tokens share the call.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"

namespace lockstep {

struct Routing {
  int64_t tokens = 0, k = 0;
  std::vector<int32_t> experts;  // [tokens][k]: rank j's expert id
  std::vector<float> weights;    // [tokens][k]: its routing weight
};

// logits: [tokens][n_experts] router logits (host). The softmax is kernels::softmax (exp_f32,
// the scheduled sum); the renormalising sum adds the k probabilities in rank order. With a pool,
// the tokens of a large call are routed on its threads (the same bits: each token's routing is
// its own row's).
Routing route_tokens(std::span<const float> logits, int64_t tokens, int64_t n_experts, int64_t k,
                     bool normalize, ThreadPool* pool = nullptr);

// Tokens grouped by expert (expert order, tokens ascending within one): assignment (t, j) of
// token t's rank-j expert sits at row slot[t * k + j] of the grouped buffers; source[row] is its
// token. Backend::moe_group computes the same on the device.
struct ExpertGroups {
  std::vector<int32_t> source, slot;
  std::vector<int64_t> first, count;  // per expert: first grouped row, rows
};
ExpertGroups group_by_expert(const Routing& r, int64_t E);

}  // namespace lockstep
