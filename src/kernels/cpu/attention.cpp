// Causal attention over a paged KV cache. One (query row, head) pair is one task: its scores use
// the dot schedule, the softmax denominator sums exp(score - max) over positions in the 16-lane
// schedule (lane = position mod 16), and the output accumulates values in position order. All of
// that is a function of the query, its keys and their absolute positions only: the number of rows
// in the call, the block size and the thread count never enter.
#include <cmath>
#include <vector>

#include "core/profile.h"
#include "kernels/math.h"
#include "kernels/ops.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/schedule.h"

namespace lockstep::kernels {

namespace {
void attend_one(const float* q, const AttentionRow& row, int64_t kvh, const KvLayerView& kv,
                float scale, float* out, std::vector<float>& scores) {
  const int64_t hd = kv.head_dim, n = row.n_keys;
  const int64_t stride = kv.n_kv_heads * hd;  // floats per position inside a block
  auto key = [&](const float* base, int64_t p) {
    const int64_t block = row.block_table[p / kv.block_tokens];
    return base + (block * kv.block_tokens + p % kv.block_tokens) * stride + kvh * hd;
  };
  scores.resize(n);
  float mx = -INFINITY;
  for (int64_t p = 0; p < n; ++p) {
    scores[p] = ref::dot(q, key(kv.k, p), hd) * scale;
    mx = std::fmax(mx, scores[p]);
  }
  float lanes[kLanes] = {};
  for (int64_t p = 0; p < n; ++p) {
    scores[p] = exp_f32(scores[p] - mx);
    lanes[p % kLanes] += scores[p];
  }
  const float inv = 1.0f / fold_lanes(lanes);
  for (int64_t d = 0; d < hd; ++d) out[d] = 0.0f;
  for (int64_t p = 0; p < n; ++p) {
    const float w = scores[p] * inv;
    const float* v = key(kv.v, p);
    for (int64_t d = 0; d < hd; ++d) out[d] = std::fma(w, v[d], out[d]);
  }
}
}  // namespace

void attention(const float* q, int64_t T, std::span<const AttentionRow> rows, int64_t n_heads,
               const KvLayerView& kv, float scale, float* out, ThreadPool& pool) {
  profile::Scope prof(profile::Op::Attention);
  const int64_t hd = kv.head_dim, group = n_heads / kv.n_kv_heads;
  pool.parallel_for(T * n_heads, [&](int64_t b, int64_t e) {
    std::vector<float> scores;
    for (int64_t i = b; i < e; ++i) {
      const int64_t t = i / n_heads, h = i % n_heads;
      attend_one(q + (t * n_heads + h) * hd, rows[t], h / group, kv, scale,
                 out + (t * n_heads + h) * hd, scores);
    }
  });
}

}  // namespace lockstep::kernels
