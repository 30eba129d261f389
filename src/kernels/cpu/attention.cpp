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
#include "kernels/cpu/vec_math-inl.h"
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

HWY_INLINE float scheduled_dot(const float* a, const float* b, int64_t K) {
  return vm::dot16<kG>(DF(), a, b, K);
}

// Four keys' scheduled dots at once: four independent FMA chains instead of one, so the FMA
// latency of one key's chain no longer bounds the loop. Each key's arithmetic is unchanged.
HWY_INLINE void scheduled_dot4(const float* a, const float* const* b, int64_t K, float* out) {
  const DF df;
  VF acc[4][kG];
  for (int j = 0; j < 4; ++j)
    for (int g = 0; g < kG; ++g) acc[j][g] = hn::Zero(df);
  const int64_t full = K / kLanes * kLanes;
  for (int64_t k = 0; k < full; k += kLanes)
    for (int g = 0; g < kG; ++g) {
      const VF av = hn::LoadU(df, a + k + g * kN);
      for (int j = 0; j < 4; ++j)
        acc[j][g] = hn::MulAdd(av, hn::LoadU(df, b[j] + k + g * kN), acc[j][g]);
    }
  if (full < K) {
    HWY_ALIGN float ap[kLanes] = {}, bp[4][kLanes] = {};
    for (int64_t i = 0; i < K - full; ++i) {
      ap[i] = a[full + i];
      for (int j = 0; j < 4; ++j) bp[j][i] = b[j][full + i];
    }
    for (int g = 0; g < kG; ++g)
      for (int j = 0; j < 4; ++j)
        acc[j][g] = hn::MulAdd(hn::Load(df, ap + g * kN), hn::Load(df, bp[j] + g * kN), acc[j][g]);
  }
  for (int j = 0; j < 4; ++j) out[j] = vm::fold16<kG>(df, acc[j]);
}

// std::fmax without the library call. It may pick the other zero for fmax(+0, -0); the max only
// enters as exp(score - max), where the sign of a zero max changes no bit.
HWY_INLINE float fmax_inline(float a, float b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return a < b ? b : a;
}

// out[d0 .. d0 + NV * kN) = sum over p in order of fma(w_p, v_p[d], .), accumulators in registers.
template <int NV, typename ValueFn>
HWY_INLINE void value_block(const float* scores, float inv, int64_t n, ValueFn value, int64_t d0,
                            float* out) {
  const DF df;
  VF acc[NV];
  for (int i = 0; i < NV; ++i) acc[i] = hn::Zero(df);
  for (int64_t p = 0; p < n; ++p) {
    const VF w = hn::Set(df, scores[p] * inv);
    const float* v = value(p) + d0;
    for (int i = 0; i < NV; ++i) acc[i] = hn::MulAdd(w, hn::LoadU(df, v + i * kN), acc[i]);
  }
  for (int i = 0; i < NV; ++i) hn::StoreU(acc[i], df, out + d0 + i * kN);
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
  int64_t p = 0;
  for (; p + 4 <= n; p += 4) {
    const float* keys[4] = {key(p), key(p + 1), key(p + 2), key(p + 3)};
    float dots[4];
    scheduled_dot4(q, keys, hd, dots);
    for (int j = 0; j < 4; ++j) {
      scores[p + j] = dots[j] * scale;
      mx = fmax_inline(mx, scores[p + j]);
    }
  }
  for (; p < n; ++p) {
    scores[p] = scheduled_dot(q, key(p), hd) * scale;
    mx = fmax_inline(mx, scores[p]);
  }
  // exp in vectors (vm::exp is exp_f32 per lane); the denominator's lane p mod 16 adds scores in
  // position order. Padding adds +0 to a lane that is already >= +0: no bit changes.
  const VF vmx = hn::Set(df, mx);
  for (p = 0; p + static_cast<int64_t>(kN) <= n; p += kN)
    hn::StoreU(vm::exp(df, hn::Sub(hn::LoadU(df, scores + p), vmx)), df, scores + p);
  for (; p < n; ++p) scores[p] = exp_f32(scores[p] - mx);
  VF den[kG];
  for (int g = 0; g < kG; ++g) den[g] = hn::Zero(df);
  const int64_t full = n / kLanes * kLanes;
  for (p = 0; p < full; p += kLanes)
    for (int g = 0; g < kG; ++g) den[g] = hn::Add(den[g], hn::LoadU(df, scores + p + g * kN));
  HWY_ALIGN float lanes[kLanes];
  for (int g = 0; g < kG; ++g) hn::Store(den[g], df, lanes + g * kN);
  for (p = full; p < n; ++p) lanes[p % kLanes] += scores[p];
  const float inv = 1.0f / fold_lanes(lanes);
  // out[d] = fma(w_p, v_p[d], out[d]) over p in order, for each d: blocks of kVB vectors of d.
  int64_t d0 = 0;
  for (; d0 + static_cast<int64_t>(kVB * kN) <= hd; d0 += kVB * kN)
    value_block<kVB>(scores, inv, n, value, d0, out);
  switch ((hd - d0) / static_cast<int64_t>(kN)) {  // the last, partial block
    case 0: break;
    case 1: value_block<1>(scores, inv, n, value, d0, out); break;
    case 2: value_block<2>(scores, inv, n, value, d0, out); break;
    case 3: value_block<3>(scores, inv, n, value, d0, out); break;
    case 4: value_block<4>(scores, inv, n, value, d0, out); break;
    case 5: value_block<5>(scores, inv, n, value, d0, out); break;
    case 6: value_block<6>(scores, inv, n, value, d0, out); break;
    default: value_block<7>(scores, inv, n, value, d0, out); break;
  }
  d0 += (hd - d0) / static_cast<int64_t>(kN) * static_cast<int64_t>(kN);
  for (int64_t d = d0; d < hd; ++d) {  // head_dim not a multiple of the vector width
    float o = 0.0f;
    for (int64_t p = 0; p < n; ++p) o = std::fma(scores[p] * inv, value(p)[d], o);
    out[d] = o;
  }
#endif
}

// Tasks [b, e) of the T x n_heads (row, head) pairs. Position p's slot offset inside the layer
// (block * block_tokens + p % block_tokens) * stride is listed once per row by walking its block
// table, not divided out per key: a 64-bit division per key cost more than the key's dot product.
void AttendTasks(const float* q, const AttentionRow* rows, int64_t n_heads, const KvLayerView& kv,
                 float scale, float* out, int64_t b, int64_t e) {
  const int64_t hd = kv.head_dim, group = n_heads / kv.n_kv_heads;
  const int64_t stride = kv.n_kv_heads * hd;  // floats per position inside a block
  std::vector<float> scores;
  std::vector<int64_t> offset;
  int64_t listed_row = -1;
  for (int64_t i = b; i < e; ++i) {
    const int64_t t = i / n_heads, h = i % n_heads, kvh = h / group;
    const AttentionRow& row = rows[t];
    if (t != listed_row) {
      offset.resize(row.n_keys);
      for (int64_t p0 = 0, blk = 0; p0 < row.n_keys; p0 += kv.block_tokens, ++blk) {
        const int64_t base = row.block_table[blk] * kv.block_tokens * stride;
        const int64_t m = std::min(kv.block_tokens, row.n_keys - p0);
        for (int64_t j = 0; j < m; ++j) offset[p0 + j] = base + j * stride;
      }
      listed_row = t;
    }
    const float* kh = kv.k + kvh * hd;
    const float* vh = kv.v + kvh * hd;
    const int64_t* off = offset.data();
    scores.resize(row.n_keys);
    attend_one(
        q + i * hd, hd, row.n_keys, scale, [&](int64_t p) { return kh + off[p]; },
        [&](int64_t p) { return vh + off[p]; }, scores.data(), out + i * hd);
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
