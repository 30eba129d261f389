// Causal attention over a paged KV cache, compiled per Highway target. Each (query row, head) pair
// is computed exactly as ref::attend_one states it (kernels/ref/ref_ops.h): scores by
// the dot schedule, exp of (score - max), the denominator in the 16-lane schedule over positions,
// values accumulated in position order. SIMD only runs independent lanes of that statement side
// by side (the 16 dot lanes; the head_dim outputs of the value sum; the query heads of a GQA
// group, which share key and value loads), so every target gives the oracle's bits. The number
// of rows in the call, the block size and the thread count never enter.
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

#if LOCKSTEP_HWY_SVE  // runs the NEON pass's kernel (fma_targets.h says why)
namespace lockstep::kernels::N_NEON {
void AttendTasks(const float* q, const AttentionRow* rows, int64_t n_heads, const KvLayerView& kv,
                 float scale, float* out, int64_t b, int64_t e);
}
#endif

HWY_BEFORE_NAMESPACE();
namespace lockstep::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if !LOCKSTEP_HWY_NO_FMA && !LOCKSTEP_HWY_SVE
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

// The scheduled dots of NQ queries with KB keys at once: NQ x KB independent FMA chains instead of
// one, so FMA latency no longer bounds the loop and each key row is loaded once for the NQ query
// heads that share it (GQA). Each (query, key) pair's arithmetic is scheduled_dot's.
template <int NQ, int KB>
HWY_INLINE void scheduled_dots(const float* const* a, const float* const* b, int64_t K,
                               float (*out)[KB]) {
  const DF df;
  VF acc[NQ][KB][kG];
  for (int i = 0; i < NQ; ++i)
    for (int j = 0; j < KB; ++j)
      for (int g = 0; g < kG; ++g) acc[i][j][g] = hn::Zero(df);
  const int64_t full = K / kLanes * kLanes;
  for (int64_t k = 0; k < full; k += kLanes)
    for (int g = 0; g < kG; ++g) {
      VF bv[KB];
      for (int j = 0; j < KB; ++j) bv[j] = hn::LoadU(df, b[j] + k + g * kN);
      for (int i = 0; i < NQ; ++i) {
        const VF av = hn::LoadU(df, a[i] + k + g * kN);
        for (int j = 0; j < KB; ++j) acc[i][j][g] = hn::MulAdd(av, bv[j], acc[i][j][g]);
      }
    }
  if (full < K) {
    HWY_ALIGN float ap[NQ][kLanes] = {}, bp[KB][kLanes] = {};
    for (int64_t e = 0; e < K - full; ++e) {
      for (int i = 0; i < NQ; ++i) ap[i][e] = a[i][full + e];
      for (int j = 0; j < KB; ++j) bp[j][e] = b[j][full + e];
    }
    for (int g = 0; g < kG; ++g)
      for (int i = 0; i < NQ; ++i)
        for (int j = 0; j < KB; ++j)
          acc[i][j][g] =
              hn::MulAdd(hn::Load(df, ap[i] + g * kN), hn::Load(df, bp[j] + g * kN), acc[i][j][g]);
  }
  for (int i = 0; i < NQ; ++i)
    for (int j = 0; j < KB; ++j) out[i][j] = vm::fold16<kG>(df, acc[i][j]);
}

// std::fmax without the library call. It may pick the other zero for fmax(+0, -0); the max only
// enters as exp(score - max), where the sign of a zero max changes no bit.
HWY_INLINE float fmax_inline(float a, float b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return a < b ? b : a;
}

// For each of NQ heads a: out[a][d0 .. d0 + NV * kN) = sum over p in order of fma(w_ap, v_p[d], .),
// accumulators in registers; each value row is loaded once for the NQ heads.
template <int NQ, int NV, typename ValueFn>
HWY_INLINE void value_block(float* const* scores, const float* inv, int64_t n, ValueFn value,
                            int64_t d0, float* const* out) {
  const DF df;
  VF acc[NQ][NV];
  for (int a = 0; a < NQ; ++a)
    for (int i = 0; i < NV; ++i) acc[a][i] = hn::Zero(df);
  for (int64_t p = 0; p < n; ++p) {
    const float* v = value(p) + d0;
    VF w[NQ];
    for (int a = 0; a < NQ; ++a) w[a] = hn::Set(df, scores[a][p] * inv[a]);
    for (int i = 0; i < NV; ++i) {
      const VF vv = hn::LoadU(df, v + i * kN);
      for (int a = 0; a < NQ; ++a) acc[a][i] = hn::MulAdd(w[a], vv, acc[a][i]);
    }
  }
  for (int a = 0; a < NQ; ++a)
    for (int i = 0; i < NV; ++i) hn::StoreU(acc[a][i], df, out[a] + d0 + i * kN);
}

// Scores of NQ query heads against all n keys, scaled, and each head's running maximum (in
// position order, as ref::attend_one takes it).
template <int NQ, typename KeyFn>
HWY_INLINE void scores_for(const float* const* q, int64_t hd, int64_t n, float scale, KeyFn key,
                           float* const* scores, float* mx) {
  constexpr int KB = kN >= 16 ? 4 : (NQ > 1 ? 2 : 4);  // keys per step: accumulators fit
  int64_t p = 0;
  for (; p + KB <= n; p += KB) {
    const float* keys[KB];
    for (int j = 0; j < KB; ++j) keys[j] = key(p + j);
    float dots[NQ][KB];
    scheduled_dots<NQ, KB>(q, keys, hd, dots);
    for (int a = 0; a < NQ; ++a)
      for (int j = 0; j < KB; ++j) {
        scores[a][p + j] = dots[a][j] * scale;
        mx[a] = fmax_inline(mx[a], scores[a][p + j]);
      }
  }
  for (; p < n; ++p)
    for (int a = 0; a < NQ; ++a) {
      scores[a][p] = scheduled_dot(q[a], key(p), hd) * scale;
      mx[a] = fmax_inline(mx[a], scores[a][p]);
    }
}

// exp(score - max) in place and 1 / the denominator, the denominator's lane p mod 16 adding the
// scores in position order.
HWY_INLINE float normalize_scores(float* scores, int64_t n, float mx) {
  const DF df;
  // exp in vectors (vm::exp is exp_f32 per lane). Padding adds +0 to a lane that is already
  // >= +0: no bit changes.
  const VF vmx = hn::Set(df, mx);
  int64_t p = 0;
  for (; p + static_cast<int64_t>(kN) <= n; p += kN)
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
  return 1.0f / fold_lanes(lanes);
}

// out[a][d] = fma(w_ap, v_p[d], out[a][d]) over p in order, for each d and each of NQ heads:
// blocks of kVB vectors of d, then a partial block, then scalar d.
template <int NQ, typename ValueFn>
HWY_INLINE void values_for(float* const* scores, const float* inv, int64_t hd, int64_t n,
                           ValueFn value, float* const* out) {
  int64_t d0 = 0;
  for (; d0 + static_cast<int64_t>(kVB * kN) <= hd; d0 += kVB * kN)
    value_block<NQ, kVB>(scores, inv, n, value, d0, out);
  switch ((hd - d0) / static_cast<int64_t>(kN)) {  // the last, partial block
    case 0: break;
    case 1: value_block<NQ, 1>(scores, inv, n, value, d0, out); break;
    case 2: value_block<NQ, 2>(scores, inv, n, value, d0, out); break;
    case 3: value_block<NQ, 3>(scores, inv, n, value, d0, out); break;
    case 4: value_block<NQ, 4>(scores, inv, n, value, d0, out); break;
    case 5: value_block<NQ, 5>(scores, inv, n, value, d0, out); break;
    case 6: value_block<NQ, 6>(scores, inv, n, value, d0, out); break;
    default: value_block<NQ, 7>(scores, inv, n, value, d0, out); break;
  }
  d0 += (hd - d0) / static_cast<int64_t>(kN) * static_cast<int64_t>(kN);
  for (int a = 0; a < NQ; ++a)
    for (int64_t d = d0; d < hd; ++d) {  // head_dim not a multiple of the vector width
      float o = 0.0f;
      for (int64_t p = 0; p < n; ++p) o = std::fma(scores[a][p] * inv[a], value(p)[d], o);
      out[a][d] = o;
    }
}
#endif

#if LOCKSTEP_HWY_SVE
void AttendTasks(const float* q, const AttentionRow* rows, int64_t n_heads, const KvLayerView& kv,
                 float scale, float* out, int64_t b, int64_t e) {
  N_NEON::AttendTasks(q, rows, n_heads, kv, scale, out, b, e);
}
#else
// The G query heads q[a * hd ..] (a < G) that share one KV head, each computed exactly as
// ref::attend_one: scores[a * n ..] and out[a * hd ..] per head. Heads are taken kQ at a time for
// the scores and two at a time for the values, so each key and value row is loaded once per such
// sub-group instead of once per head; no head's arithmetic or order changes.
template <typename KeyFn, typename ValueFn>
void attend_group(const float* q, int64_t G, int64_t hd, int64_t n, float scale, KeyFn key,
                  ValueFn value, float* scores, float* out) {
#if LOCKSTEP_HWY_NO_FMA
  for (int64_t a = 0; a < G; ++a)
    ref::attend_one(q + a * hd, hd, n, scale, key, value, scores + a * n, out + a * hd);
#else
  constexpr int64_t kQ = kN >= 16 ? 4 : 2;  // query heads per pass over the keys
  for (int64_t a0 = 0; a0 < G; a0 += kQ) {
    const int64_t nq = std::min(kQ, G - a0);
    const float* qs[kQ];
    float* ss[kQ];
    float mx[kQ];
    for (int64_t a = 0; a < nq; ++a) {
      qs[a] = q + (a0 + a) * hd;
      ss[a] = scores + (a0 + a) * n;
      mx[a] = -INFINITY;
    }
    switch (nq) {
      case 1: scores_for<1>(qs, hd, n, scale, key, ss, mx); break;
      case 2: scores_for<2>(qs, hd, n, scale, key, ss, mx); break;
      case 3: scores_for<3>(qs, hd, n, scale, key, ss, mx); break;
      default: scores_for<4>(qs, hd, n, scale, key, ss, mx); break;
    }
    float inv[kQ];
    for (int64_t a = 0; a < nq; ++a) inv[a] = normalize_scores(ss[a], n, mx[a]);
    for (int64_t a = 0; a < nq; a += 2) {
      float* os[2] = {out + (a0 + a) * hd, nullptr};
      if (a + 2 <= nq) {
        os[1] = os[0] + hd;
        values_for<2>(ss + a, inv + a, hd, n, value, os);
      } else {
        values_for<1>(ss + a, inv + a, hd, n, value, os);
      }
    }
  }
#endif
}

// Tasks [b, e) of the T x n_kv_heads (row, KV head) pairs; a task computes the n_heads /
// n_kv_heads query heads that read that KV head. Position p's slot offset inside the layer
// (block * block_tokens + p % block_tokens) * stride is listed once per row by walking its block
// table, not divided out per key: a 64-bit division per key cost more than the key's dot product.
void AttendTasks(const float* q, const AttentionRow* rows, int64_t n_heads, const KvLayerView& kv,
                 float scale, float* out, int64_t b, int64_t e) {
  const int64_t hd = kv.head_dim, nkv = kv.n_kv_heads, group = n_heads / nkv;
  const int64_t stride = nkv * hd;  // floats per position inside a block
  std::vector<float> scores;
  std::vector<int64_t> offset;
  int64_t listed_row = -1;
  for (int64_t i = b; i < e; ++i) {
    const int64_t t = i / nkv, kvh = i % nkv;
    const AttentionRow& row = rows[t];
    // The row's keys are positions [first, n_keys); offset[j] locates position first + j.
    const int64_t first = row.first_key, n = row.n_keys - first;
    if (t != listed_row) {
      offset.resize(n);
      for (int64_t p = first; p < row.n_keys;) {
        const int64_t blk = p / kv.block_tokens, in_blk = p % kv.block_tokens;
        const int64_t base = row.block_table[blk] * kv.block_tokens * stride;
        const int64_t m = std::min(kv.block_tokens - in_blk, row.n_keys - p);
        for (int64_t j = 0; j < m; ++j) offset[p - first + j] = base + (in_blk + j) * stride;
        p += m;
      }
      listed_row = t;
    }
    const float* kh = static_cast<const float*>(kv.k) + kvh * hd;  // F32: checked by attention()
    const float* vh = static_cast<const float*>(kv.v) + kvh * hd;
    const int64_t* off = offset.data();
    scores.resize(group * n);
    const int64_t head0 = (t * n_heads + kvh * group) * hd;  // the group's heads are consecutive
    attend_group(
        q + head0, group, hd, n, scale, [&](int64_t j) { return kh + off[j]; },
        [&](int64_t j) { return vh + off[j]; }, scores.data(), out + head0);
  }
}

#endif  // LOCKSTEP_HWY_SVE

}  // namespace lockstep::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/error.h"
#include "core/profile.h"

namespace lockstep::kernels {
HWY_EXPORT(AttendTasks);

void attention(const float* q, int64_t T, std::span<const AttentionRow> rows, int64_t n_heads,
               const KvLayerView& kv, float scale, float* out, ThreadPool& pool) {
  profile::Scope prof(profile::Op::Attention);
  if (kv.dtype != DType::F32) fail("CPU attention: the KV cache must be F32");
  for (const AttentionRow& r : rows)
    if (r.first_key < 0 || r.first_key >= r.n_keys)
      fail("CPU attention: a row's keys [", r.first_key, ", ", r.n_keys, ") are empty");
  // One task per (row, KV head): the query heads of a GQA group share their key and value loads.
  // Tasks are independent outputs, so the split never changes a bit.
  pool.parallel_for(T * kv.n_kv_heads, [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(AttendTasks)(q, rows.data(), n_heads, kv, scale, out, b, e);
  });
}

}  // namespace lockstep::kernels
#endif
