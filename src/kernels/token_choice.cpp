#include "kernels/token_choice.h"

#include <algorithm>
#include <cmath>

#include "kernels/math.h"
#include "kernels/schedule.h"

namespace lockstep::kernels {

int32_t choose_token(std::span<const float> logits, const TokenRule& p, ChoiceScratch& s) {
  const int64_t V = static_cast<int64_t>(logits.size());
  std::vector<float>& work = s.work;
  work.assign(logits.begin(), logits.end());
  if (p.masked())  // before everything else, as constraints::apply_mask before Sampler::choose
    for (int64_t i = 0; i < V; ++i)
      if (!p.allows(i)) work[i] = -INFINITY;
  for (const TokenAdjust& a : p.adjust)
    if (a.id >= 0 && a.id < V)
      work[a.id] = choice::penalized(work[a.id], a.output_count, a.seen, p.repetition_penalty,
                                     p.presence_penalty, p.frequency_penalty);
  if (p.greedy()) {
    // Candidates in id order, each compared with the best so far (choice::better).
    int32_t best = 0;
    for (int32_t i = 1; i < V; ++i)
      if (choice::better(work[i], i, work[best], best)) best = i;
    return best;
  }
  for (auto& w : work) w = choice::div(w, p.temperature);
  auto better = [&](int32_t a, int32_t b) { return choice::better(work[a], a, work[b], b); };
  // Candidates: all ids, or the top-k, in descending order when a filter needs the order.
  std::vector<int32_t>& ids = s.ids;
  ids.resize(V);
  for (int32_t i = 0; i < V; ++i) ids[i] = i;
  if (p.needs_sorted()) {
    const int64_t k = p.top_k > 0 ? std::min<int64_t>(p.top_k, V) : V;
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), better);
    ids.resize(k);
    if (p.top_p < 1.0f || p.min_p > 0.0f) {
      // Probabilities over the candidates in descending order (a fixed order: the sort's).
      const float mx = work[ids[0]];
      std::vector<float>& e = s.e;
      e.resize(ids.size());
      float lanes[kLanes] = {};
      for (size_t i = 0; i < ids.size(); ++i) {
        e[i] = exp_f32(work[ids[i]] - mx);
        lanes[i % kLanes] += e[i];
      }
      const float total = fold_lanes(lanes);
      size_t keep = ids.size();
      if (p.min_p > 0.0f) {  // e[0] / total is the top probability
        const float threshold = p.min_p * e[0];
        keep = 1;
        while (keep < ids.size() && e[keep] >= threshold) ++keep;
      }
      if (p.top_p < 1.0f) {
        float cum = 0.0f;
        size_t n = 0;
        while (n < keep) {
          cum += e[n] / total;
          ++n;
          if (cum >= p.top_p) break;
        }
        keep = std::max<size_t>(1, n);
      }
      ids.resize(keep);
    }
  }
  // work already holds value / T: the score is choice::gumbel_score's sum, the same operations.
  int32_t best = -1;
  float best_score = -INFINITY;
  for (int32_t id : ids) {
    const float score =
        choice::add(work[id], choice::gumbel(choice::position_uniform(p.seed, p.position, id)));
    if (best < 0 || choice::better(score, id, best_score, best)) {
      best = id;
      best_score = score;
    }
  }
  return best;
}

}  // namespace lockstep::kernels
