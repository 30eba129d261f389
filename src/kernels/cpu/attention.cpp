// Causal attention over a paged KV cache, compiled per Highway target. One (query row, head) pair
// is one task, computed exactly as ref::attend_one states it (kernels/ref/ref_ops.h): scores by
// the dot schedule, exp of (score - max), the denominator in the 16-lane schedule over positions,
// values accumulated in position order. SIMD only runs independent lanes of that statement side
// by side (the 16 dot lanes; the head_dim outputs of the value sum), so every target gives the
// oracle's bits. The number of rows in the call, the block size and the thread count never enter.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/fma_targets.h"
#include "kernels/math.h"
#include "kernels/ops.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/schedule.h"

HWY_BEFORE_NAMESPACE();
namespace lockstep::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if !LOCKSTEP_HWY_NO_FMA
using DF = hn::CappedTag<float, kLanes>;
using VF = decltype(hn::Zero(DF()));
constexpr size_t kN = hn::MaxLanes(DF());
constexpr int kG = kLanes / static_cast<int>(kN);  // vectors per 16-lane group
// Value accumulators kept in registers per pass over the positions (head_dim 128 on AVX-512 is
// one pass).
constexpr int kVB = kN >= 16 ? 8 : 4;

// ref::dot's schedule: lane = d mod 16, FMAs in increasing d, zero padding, fixed fold.
HWY_INLINE float scheduled_dot(const float* a, const float* b, int64_t K) {
  const DF df;
  VF acc[kG];
  for (int g = 0; g < kG; ++g) acc[g] = hn::Zero(df);
  const int64_t full = K / kLanes * kLanes;
  for (int64_t k = 0; k < full; k += kLanes)
    for (int g = 0; g < kG; ++g)
      acc[g] = hn::MulAdd(hn::LoadU(df, a + k + g * kN), hn::LoadU(df, b + k + g * kN), acc[g]);
  if (full < K) {
    HWY_ALIGN float ap[kLanes] = {}, bp[kLanes] = {};
    for (int64_t i = 0; i < K - full; ++i) {
      ap[i] = a[full + i];
      bp[i] = b[full + i];
    }
    for (int g = 0; g < kG; ++g)
      acc[g] = hn::MulAdd(hn::Load(df, ap + g * kN), hn::Load(df, bp + g * kN), acc[g]);
  }
  HWY_ALIGN float lanes[kLanes];
  for (int g = 0; g < kG; ++g) hn::Store(acc[g], df, lanes + g * kN);
  return fold_lanes(lanes);
}
#endif

template <typename KeyFn, typename ValueFn>
void attend_one(const float* q, int64_t hd, int64_t n, float scale, KeyFn key, ValueFn value,
                float* scores, float* out) {
#if LOCKSTEP_HWY_NO_FMA
  ref::attend_one(q, hd, n, scale, key, value, scores, out);
#else
  const DF df;
  float mx = -INFINITY;
  for (int64_t p = 0; p < n; ++p) {
    scores[p] = scheduled_dot(q, key(p), hd) * scale;
    mx = std::fmax(mx, scores[p]);
  }
  float lanes[kLanes] = {};
  for (int64_t p = 0; p < n; ++p) {
    scores[p] = exp_f32(scores[p] - mx);
    lanes[p % kLanes] += scores[p];
  }
  const float inv = 1.0f / fold_lanes(lanes);
  // out[d] = fma(w_p, v_p[d], out[d]) over p in order, for each d: blocks of kVB vectors of d.
  int64_t d0 = 0;
  for (; d0 + static_cast<int64_t>(kN) <= hd; d0 += kVB * kN) {
    const int nv = static_cast<int>(std::min<int64_t>(kVB, (hd - d0) / kN));
    VF acc[kVB];
    for (int i = 0; i < kVB; ++i) acc[i] = hn::Zero(df);
    for (int64_t p = 0; p < n; ++p) {
      const VF w = hn::Set(df, scores[p] * inv);
      const float* v = value(p) + d0;
      for (int i = 0; i < nv; ++i) acc[i] = hn::MulAdd(w, hn::LoadU(df, v + i * kN), acc[i]);
    }
    for (int i = 0; i < nv; ++i) hn::StoreU(acc[i], df, out + d0 + i * kN);
    if (nv < kVB) {
      d0 += nv * kN;
      break;
    }
  }
  for (int64_t d = d0; d < hd; ++d) {  // head_dim not a multiple of the vector width
    float o = 0.0f;
    for (int64_t p = 0; p < n; ++p) o = std::fma(scores[p] * inv, value(p)[d], o);
    out[d] = o;
  }
#endif
}

// Tasks [b, e) of the T x n_heads (row, head) pairs.
void AttendTasks(const float* q, const AttentionRow* rows, int64_t n_heads, const KvLayerView& kv,
                 float scale, float* out, int64_t b, int64_t e) {
  const int64_t hd = kv.head_dim, group = n_heads / kv.n_kv_heads;
  const int64_t stride = kv.n_kv_heads * hd;  // floats per position inside a block
  std::vector<float> scores;
  for (int64_t i = b; i < e; ++i) {
    const int64_t t = i / n_heads, h = i % n_heads, kvh = h / group;
    const AttentionRow& row = rows[t];
    auto at = [&](const float* base, int64_t p) {
      const int64_t block = row.block_table[p / kv.block_tokens];
      return base + (block * kv.block_tokens + p % kv.block_tokens) * stride + kvh * hd;
    };
    scores.resize(row.n_keys);
    attend_one(
        q + i * hd, hd, row.n_keys, scale, [&](int64_t p) { return at(kv.k, p); },
        [&](int64_t p) { return at(kv.v, p); }, scores.data(), out + i * hd);
  }
}

}  // namespace lockstep::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/profile.h"

namespace lockstep::kernels {
HWY_EXPORT(AttendTasks);

void attention(const float* q, int64_t T, std::span<const AttentionRow> rows, int64_t n_heads,
               const KvLayerView& kv, float scale, float* out, ThreadPool& pool) {
  profile::Scope prof(profile::Op::Attention);
  pool.parallel_for(T * n_heads, [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(AttendTasks)(q, rows.data(), n_heads, kv, scale, out, b, e);
  });
}

}  // namespace lockstep::kernels
#endif
