// linear(): y = x W^T on the CPU, compiled for every Highway target and dispatched at run time.
//
// Each output element y[m][n] is one scheduled dot product (schedule.h): 16 logical lanes, lane =
// k mod 16, FMAs in increasing k, zero padding to a multiple of 16, fixed folding tree. Tiles of
// R rows x C columns only decide which independent dot products share register loads; threads
// split the N columns. Neither changes any element's arithmetic, so a GEMV for one token and a
// GEMM for 512 tokens give the same bits row for row.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/linear.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/cpu_tuning.h"
#include "kernels/cpu/fma_targets.h"
#include "kernels/cpu/vec_math-inl.h"
#include "kernels/ops.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/schedule.h"

#if LOCKSTEP_HWY_SVE  // runs the NEON pass's kernel (fma_targets.h says why)
namespace lockstep::kernels::N_NEON {
void LinearCols(const float* x, int64_t M, DType dtype, const void* w, int64_t K, int64_t n0,
                int64_t n1, float* y, int64_t N);
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

// Loads kN weights starting at p as float32 (exact conversions).
HWY_INLINE VF load_w(const float* p) { return hn::LoadU(DF(), p); }
// bf16: the bits are the top half of a float32. On 16-lane targets this is a zero-extension
// (vpmovzxwd) and a shift per 16 weights; in-lane unpacks against zero (x permuted to match) or
// one masked vpermw were no faster on Zen 5: with weights in L2 this form already reads ~110 GB/s
// per core, three times what DRAM delivers to a core, so a one-row call waits on memory.
HWY_INLINE VF load_w(const uint16_t* p) {
  const DF df;
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}
HWY_INLINE VF load_w(const hwy::float16_t* p) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> df16;
  return hn::PromoteTo(df, hn::LoadU(df16, p));
}

// Elements of each row that a one-row tile of C columns reads ahead of (see tile()), for
// `bytes` ahead in total over the tile's rows (cpu_tuning.h: gemv_prefetch_bytes()).
template <int C, typename WT>
HWY_INLINE int64_t prefetch_ahead(int64_t K, int64_t bytes) {
  return std::min<int64_t>(K, bytes / C / 64 * (64 / sizeof(WT)));
}

// Computes a tile of R rows x C columns. x rows are K floats apart; w rows K elements apart.
// Full 16-blocks are read in place; the tail block reads zero-padded copies.
// Hint: __builtin_prefetch's locality (0 = prefetchnta ... 3 = prefetcht0).
template <int R, int C, typename WT, int Hint = 0>
HWY_INLINE void tile(const float* x, const WT* w, int64_t K, float* y, int64_t ldy,
                     int64_t ahead) {
  const DF df;
  VF acc[R][C][kG];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      for (int g = 0; g < kG; ++g) acc[r][c][g] = hn::Zero(df);

  const int64_t full = K / kLanes * kLanes;
  // One-row calls stream the weights once from DRAM and are bound by the lines in flight: every
  // 64 bytes each row asks for its line `ahead` elements on, and once that passes the row's end,
  // for the same place in the next tile's row (tile rows are contiguous, the next tile starts C
  // rows on). The C streams so run gemv_prefetch_bytes() ahead in total, across tile boundaries,
  // and the hardware never waits on a prefetcher that has to learn C short streams anew per tile.
  // `ahead` = 0: no software prefetch.
  constexpr int64_t kLine = 64 / sizeof(WT);
  for (int64_t k = 0; k < full; k += kLanes) {
    if (R == 1 && ahead > 0 && k % kLine == 0) {
      const WT* p = k + ahead < K ? w + k + ahead : w + C * K + (k + ahead - K);
      for (int c = 0; c < C; ++c) __builtin_prefetch(p + c * K, 0, Hint);
    }
    for (int g = 0; g < kG; ++g) {
      VF wv[C], xv[R];
      for (int c = 0; c < C; ++c) wv[c] = load_w(w + c * K + k + g * kN);
      for (int r = 0; r < R; ++r) xv[r] = hn::LoadU(df, x + r * K + k + g * kN);
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c][g] = hn::MulAdd(xv[r], wv[c], acc[r][c][g]);
    }
  }
  if (full < K) {
    const int64_t rest = K - full;
    HWY_ALIGN float xpad[R][kLanes];
    HWY_ALIGN WT wpad[C][kLanes];
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < kLanes; ++i) xpad[r][i] = i < rest ? x[r * K + full + i] : 0.0f;
    for (int c = 0; c < C; ++c)
      for (int i = 0; i < kLanes; ++i) wpad[c][i] = i < rest ? w[c * K + full + i] : WT{};
    for (int g = 0; g < kG; ++g) {
      for (int r = 0; r < R; ++r) {
        const VF xv = hn::LoadU(df, &xpad[r][g * kN]);
        for (int c = 0; c < C; ++c)
          acc[r][c][g] = hn::MulAdd(xv, load_w(&wpad[c][g * kN]), acc[r][c][g]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) y[r * ldy + c] = vm::fold16<kG>(df, acc[r][c]);
}

// Tile shapes per register width: enough independent accumulators to hide FMA latency without
// spilling. These only pick which dot products run together, never their arithmetic.
constexpr int kRows = kN >= 16 ? 4 : 2;
constexpr int kCols = kN >= 16 ? 4 : 2;
constexpr int kGemvCols = kN >= 16 ? 8 : 4;  // the widest one-row tile (cpu_tuning.h)

template <int R, int C, typename WT, int Hint = 0>
void rows_block(const float* x, int64_t M, const WT* w, int64_t K, int64_t n0, int64_t n1,
                float* y, int64_t N, int64_t pf_bytes) {
  const int64_t ahead_c = prefetch_ahead<C, WT>(K, pf_bytes);
  const int64_t ahead_1 = prefetch_ahead<1, WT>(K, pf_bytes);
  int64_t m = 0;
  for (; m + R <= M; m += R) {
    int64_t n = n0;
    for (; n + C <= n1; n += C)
      tile<R, C, WT, Hint>(x + m * K, w + n * K, K, y + m * N + n, N, ahead_c);
    for (; n < n1; ++n) tile<R, 1, WT, Hint>(x + m * K, w + n * K, K, y + m * N + n, N, ahead_1);
  }
  for (; m < M; ++m) {
    int64_t n = n0;
    for (; n + C <= n1; n += C)
      tile<1, C, WT, Hint>(x + m * K, w + n * K, K, y + m * N + n, N, ahead_c);
    for (; n < n1; ++n) tile<1, 1, WT, Hint>(x + m * K, w + n * K, K, y + m * N + n, N, ahead_1);
  }
}

// One-row calls: C weight rows side by side per tile (cpu_tuning.h: gemv_tile_rows()), the
// prefetch locality as a template argument so the inner loop carries no branch on it.
template <int C, typename WT>
void gemv_cols(const float* x, const WT* w, int64_t K, int64_t n0, int64_t n1, float* y,
               int64_t N) {
  // The first tile has no tile before it to have asked for the start of its rows.
  const int64_t pf_bytes = gemv_prefetch_bytes();
  const int64_t ahead = prefetch_ahead<C, WT>(K, pf_bytes);
  for (int64_t n = n0; n < std::min<int64_t>(n1, n0 + C); ++n)
    for (int64_t k = 0; k < ahead; k += 64 / sizeof(WT)) __builtin_prefetch(w + n * K + k, 0, 0);
  switch (gemv_prefetch_locality()) {
    case 0: return rows_block<1, C, WT, 0>(x, 1, w, K, n0, n1, y, N, pf_bytes);
    case 1: return rows_block<1, C, WT, 1>(x, 1, w, K, n0, n1, y, N, pf_bytes);
    case 2: return rows_block<1, C, WT, 2>(x, 1, w, K, n0, n1, y, N, pf_bytes);
    default: return rows_block<1, C, WT, 3>(x, 1, w, K, n0, n1, y, N, pf_bytes);
  }
}

template <typename WT>
void linear_cols(const float* x, int64_t M, const WT* w, int64_t K, int64_t n0, int64_t n1,
                 float* y, int64_t N) {
  if (M == 1) {
    switch (gemv_tile_rows_up_to(kGemvCols)) {
      case 1: return gemv_cols<1>(x, w, K, n0, n1, y, N);
      case 2: return gemv_cols<2>(x, w, K, n0, n1, y, N);
      case 4: return gemv_cols<4>(x, w, K, n0, n1, y, N);
      default: return gemv_cols<kGemvCols>(x, w, K, n0, n1, y, N);
    }
  }
  // Column blocks small enough that their weights stay in L2 while every row tile passes over.
  constexpr int64_t kColBlock = 64;
  for (int64_t nb = n0; nb < n1; nb += kColBlock)
    rows_block<kRows, kCols>(x, M, w, K, nb, std::min(n1, nb + kColBlock), y, N, 0);
}
#endif  // !LOCKSTEP_HWY_NO_FMA && !LOCKSTEP_HWY_SVE

void LinearCols(const float* x, int64_t M, DType dtype, const void* w, int64_t K, int64_t n0,
                int64_t n1, float* y, int64_t N) {
#if LOCKSTEP_HWY_NO_FMA
  ref::linear_cols(x, M, dtype, w, K, n0, n1, y, N);
#elif LOCKSTEP_HWY_SVE
  N_NEON::LinearCols(x, M, dtype, w, K, n0, n1, y, N);
#else
  switch (dtype) {
    case DType::F32:
      return linear_cols(x, M, static_cast<const float*>(w), K, n0, n1, y, N);
    case DType::BF16:
      return linear_cols(x, M, static_cast<const uint16_t*>(w), K, n0, n1, y, N);
    case DType::F16:
      return linear_cols(x, M, static_cast<const hwy::float16_t*>(w), K, n0, n1, y, N);
    default:
      ref::linear_cols(x, M, dtype, w, K, n0, n1, y, N);  // reports the unsupported dtype
  }
#endif
}

}  // namespace lockstep::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <atomic>
#include <vector>

#include "core/profile.h"
#include "kernels/cpu/linear_quant.h"
#include "kernels/numerics.h"
#include "kernels/quant_format.h"

namespace lockstep::kernels {
HWY_EXPORT(LinearCols);

namespace {
std::atomic<Numerics> g_numerics{Numerics::Exact};
}
void set_numerics(Numerics mode) { g_numerics = mode; }
Numerics numerics() { return g_numerics; }

void linear(const float* x, int64_t M, const Weight& w, const float* bias, float* y,
            ThreadPool& pool) {
  if (w.quant != QuantFormat::None) return linear_quant(x, M, w, bias, y, pool);
  const int64_t N = w.rows, K = w.cols;
  profile::Scope prof(profile::Op::Linear, N * K * static_cast<int64_t>(dtype_size(w.dtype)));
  if (M > 1 && g_numerics == Numerics::Fast) {
    // Deliberately shape-dependent: multi-row calls reduce in another order than one-row calls.
    pool.parallel_for(N, [&](int64_t n0, int64_t n1) {
      ref::linear_cols_other_order(x, M, w.dtype, w.data, K, n0, n1, y, N);
      if (bias)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = n0; n < n1; ++n) y[m * N + n] += bias[n];
    });
    return;
  }
  // Grain of 16 columns keeps every thread's range a whole number of tiles.
  pool.parallel_for(
      N,
      [&](int64_t n0, int64_t n1) {
        HWY_DYNAMIC_DISPATCH(LinearCols)(x, M, w.dtype, w.data, K, n0, n1, y, N);
        if (bias)
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = n0; n < n1; ++n) y[m * N + n] += bias[n];
      },
      16);
}

void linear_multi(const float* x, int64_t M, std::span<const LinearOut> outs, ThreadPool& pool) {
  constexpr size_t kMaxOuts = 8;
  // Separate calls where one pool call would not be linear()'s kernel (fast numerics' multi-row
  // path) or would gain nothing.
  bool separate = outs.size() <= 1 || outs.size() > kMaxOuts ||
                  (M > 1 && g_numerics == Numerics::Fast);
  // The int8 quant dot quantizes x once per group size: one size per pool call.
  int64_t group = 0;
  for (const LinearOut& o : outs) {
    separate = separate || o.w->cols != outs[0].w->cols;
    if (o.w->quant == QuantFormat::None) continue;
    separate = separate || (group != 0 && o.w->group_size != group && quant_dot() == QuantDot::Int8);
    group = o.w->group_size;
  }
  if (separate) {
    for (const LinearOut& o : outs) linear(x, M, *o.w, o.bias, o.y, pool);
    return;
  }
  const int64_t K = outs[0].w->cols;
  // Weight i owns [start[i], start[i] + rows) of the union; starts are multiples of the grain, so
  // every chunk of a weight starts where a chunk of its own linear() call could.
  constexpr int64_t kGrain = 16;
  int64_t start[kMaxOuts], total = 0, bytes = 0;
  bool permute = false, panels = false;
  for (size_t i = 0; i < outs.size(); ++i) {
    const Weight& w = *outs[i].w;
    if (w.quant != QuantFormat::None) {
      check_quant_layout(w, "linear");
      permute = permute || w.bits == 4;
      panels = panels || w.panels != nullptr;
    }
    bytes += w.bytes();
    start[i] = (total + kGrain - 1) / kGrain * kGrain;
    total = start[i] + w.rows;
  }
  profile::Scope prof(profile::Op::Linear, bytes);
  thread_local QuantInput mine;  // reused across calls; the workers read it through `in`
  QuantInput& in = mine;
  if (group != 0) prepare_quant_input(x, M, K, permute, group, panels, in);
  pool.parallel_for(
      total,
      [&](int64_t b, int64_t e) {
        for (size_t i = 0; i < outs.size(); ++i) {
          const Weight& w = *outs[i].w;
          const int64_t N = w.rows;
          const int64_t n0 = std::max(b, start[i]) - start[i];
          const int64_t n1 = std::min(e, start[i] + N) - start[i];
          if (n0 >= n1) continue;
          float* y = outs[i].y;
          if (w.quant != QuantFormat::None)
            quant_linear_cols(x, in, M, w, n0, n1, y);
          else
            HWY_DYNAMIC_DISPATCH(LinearCols)(x, M, w.dtype, w.data, K, n0, n1, y, N);
          if (const float* bias = outs[i].bias)
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = n0; n < n1; ++n) y[m * N + n] += bias[n];
        }
      },
      kGrain);
}

void linear_grouped(std::span<const LinearJob> jobs, ThreadPool& pool) {
  if (jobs.size() <= 1 || g_numerics == Numerics::Fast) {
    for (const LinearJob& j : jobs) linear(j.x, j.M, *j.w, j.bias, j.y, pool);
    return;
  }
  // As linear_multi: job i owns output rows [start[i], start[i] + rows) of the union, starts on
  // the grain, so every chunk of a job starts where a chunk of its own linear() call could.
  constexpr int64_t kGrain = 16;
  const size_t n = jobs.size();
  std::vector<int64_t> start(n);
  // What each quantized job's kernel reads besides its x, prepared once per distinct input: an
  // expert's gate and up jobs read the same rows (decode: every job reads the one token's row).
  // Reused across calls, like linear()'s; the workers read it through `prepared`.
  thread_local std::vector<QuantInput> mine;
  std::vector<QuantInput>& prepared = mine;
  std::vector<size_t> input(n, 0);  // job i reads prepared[input[i]]
  struct Key {
    const float* x;
    int64_t M, K, group;
    bool four, panels;
    bool operator==(const Key&) const = default;
  };
  std::vector<Key> keys;  // keys[p] describes prepared[p]
  int64_t total = 0, bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const Weight& w = *jobs[i].w;
    if (w.quant != QuantFormat::None) {
      check_quant_layout(w, "linear");
      const Key key{jobs[i].x, jobs[i].M, w.cols, w.group_size, w.bits == 4, w.panels != nullptr};
      size_t p = 0;
      while (p < keys.size() && !(keys[p] == key)) ++p;
      if (p == keys.size()) {
        keys.push_back(key);
        if (prepared.size() < keys.size()) prepared.resize(keys.size());
        prepare_quant_input(key.x, key.M, key.K, key.four, key.group, key.panels, prepared[p]);
      }
      input[i] = p;
    }
    bytes += w.bytes();
    start[i] = (total + kGrain - 1) / kGrain * kGrain;
    total = start[i] + w.rows;
  }
  profile::Scope prof(profile::Op::Linear, bytes);
  pool.parallel_for(
      total,
      [&](int64_t b, int64_t e) {
        // The first job whose rows reach past b, then every job that starts before e.
        size_t i = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), b) -
                                       start.begin());
        i = i == 0 ? 0 : i - 1;
        for (; i < n && start[i] < e; ++i) {
          const LinearJob& j = jobs[i];
          const Weight& w = *j.w;
          const int64_t N = w.rows;
          const int64_t n0 = std::max(b, start[i]) - start[i];
          const int64_t n1 = std::min(e, start[i] + N) - start[i];
          if (n0 >= n1 || j.M == 0) continue;
          if (w.quant != QuantFormat::None)
            quant_linear_cols(j.x, prepared[input[i]], j.M, w, n0, n1, j.y);
          else
            HWY_DYNAMIC_DISPATCH(LinearCols)(j.x, j.M, w.dtype, w.data, w.cols, n0, n1, j.y, N);
          if (j.bias)
            for (int64_t m = 0; m < j.M; ++m)
              for (int64_t c = n0; c < n1; ++c) j.y[m * N + c] += j.bias[c];
        }
      },
      kGrain);
}

}  // namespace lockstep::kernels
#endif
