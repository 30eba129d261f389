// attention (cuda_ops.h): causal attention of T query rows over one layer's paged KV cache.
//
// The schedule of one (row t, query head h), whatever T, the other rows, max_keys or the KV block
// size are:
// - positions are taken in chunks of kAttentionChunk (256) aligned to absolute position 0; chunk
//   c holds positions [256c, min(256c + 256, n_keys)).
// - chunk partial: score(p) = dot(q, k_p) * scale, the dot one fmaf chain over d = 0..hd-1
//   starting from 0 (one thread per (position, head)); m_c = max of the scores; e(p) = exp_f32(score - m_c) (the CPU's polynomial,
//   common.cuh); l_c = sum of e(p): lane-partial over p = lane + 32 j in j order, then the
//   butterfly; a_c[d] = sum_p e(p) v_p[d] with fmaf in position order.
// - merge, chunks in increasing c from (M, L, A) = (-inf, 0, 0):
//   M' = max(M, m_c), alpha = exp_f32(M - M'), beta = exp_f32(m_c - M'),
//   L = L*alpha + l_c*beta, A = A*alpha + a_c*beta; out = A / L (0 when n_keys = 0).
// Two launch shapes give the same bits: few (row, kv head) pairs (decode) compute the chunk
// partials in separate blocks (flash-decoding) and merge them in a second kernel; many pairs
// (prefill) let one block walk its chunks in order and merge as it goes. One block serves the G
// query heads that share a KV head, so keys and values are read once for all of them.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mma.cuh"

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;

constexpr int kChunk = static_cast<int>(kAttentionChunk);
constexpr int kThreads = 256;
constexpr int kSub = 32;          // positions per shared-memory stage (keys, then values)
constexpr int kRing = 4;          // stages in the ring (3 in flight)
constexpr int kStagesPerChunk = 2 * kChunk / kSub;  // 8 key stages, then 8 value stages
constexpr int kMaxGroup = 16;     // query heads per KV head supported

struct AttnArgs {
  const float* q;
  const int32_t* block_tables;
  int64_t table_stride;
  const int32_t* n_keys;
  int n_heads, n_kv_heads, group, block_tokens, n_chunks;
  int rows;  // rows per in-block (attn_walk) block, rows * group <= kMaxGroup
  const float* k;
  const float* v;
  float scale;
  float* out;       // final output (merge / in-block variant)
  float* part_acc;  // [T][n_heads][n_chunks][HD] (split variant)
  float* part_ml;   // [T][n_heads][n_chunks][2]
};

template <int HD>
struct AttnSmem {
  static constexpr int kGPerThread = kMaxGroup * HD / kThreads;  // (g, d) pairs per thread
  static constexpr int kStride = HD + 4;  // floats per staged row: conflict-free float4 reads
  float q[kMaxGroup][HD];
  float s[kMaxGroup][kChunk];  // scores, then e(p)
  float ring[kRing][kSub][kStride];
  int64_t off[kChunk];         // float offset of each position's (kv head) row
  float m[kMaxGroup], l[kMaxGroup];
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Stage st of a chunk (keys of positions [32 st, 32 st + 32) for st < 8, else values of positions
// [32 (st - 8), ...)), those < np, copied into ring slot st % kRing.
template <int HD>
__device__ __forceinline__ void load_stage(AttnSmem<HD>& sm, const AttnArgs& a, int st, int np) {
  if (st >= kStagesPerChunk) return;
  const float* src = st < kStagesPerChunk / 2 ? a.k : a.v;
  const int p0 = (st % (kStagesPerChunk / 2)) * kSub;
  constexpr int kPieces = kSub * HD / 4;
  for (int i = threadIdx.x; i < kPieces; i += kThreads) {
    const int pl = i / (HD / 4), piece = i % (HD / 4);
    if (p0 + pl < np)
      cp_async16(smem_addr(&sm.ring[st % kRing][pl][piece * 4]), src + sm.off[p0 + pl] + piece * 4,
                 true);
  }
}

// One chunk of nr rows of one kv head that read the same keys (t = the row whose positions are
// looked up, the one with the most keys; nr = 1 for a single row): virtual group vg = r * G + g
// is query head g of row r. Leaves m_c / l_c in sm.m / sm.l [vg] and returns a_c for this
// thread's (vg, d) pairs in acc. sm.q must hold the rows' queries; nps[r] is row r's positions in
// this chunk (<= 0: none; that row's results are not used), np the largest. Each (row, head) gets
// exactly the single-row math: positions at or past its own count are -inf / 0 and never reach
// its sums.
template <int HD>
__device__ void chunk_partial(AttnSmem<HD>& sm, const AttnArgs& a, int t, int kh, int c, int np,
                              const int* nps, int nr, float (&acc)[AttnSmem<HD>::kGPerThread]) {
  constexpr int kG = AttnSmem<HD>::kGPerThread;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int G = a.group;
  const int VG = G * nr;
  const int p0 = c * kChunk;
  const int64_t kv_dim = static_cast<int64_t>(a.n_kv_heads) * HD;
  const int bt = a.block_tokens;
  for (int i = tid; i < np; i += kThreads) {
    const int p = p0 + i;
    const int64_t blk = a.block_tables[t * a.table_stride + p / bt];
    sm.off[i] = (blk * bt + p % bt) * kv_dim + static_cast<int64_t>(kh) * HD;
  }
  __syncthreads();
#pragma unroll
  for (int st = 0; st < kRing - 1; ++st) {
    load_stage(sm, a, st, np);
    cp_async_commit();
  }
  // Values: thread owns d = tid % HD and query heads g = tid / HD + j * (kThreads / HD).
  constexpr int kGStride = kThreads / HD;
  const int d = tid % HD, g0 = tid / HD;
#pragma unroll
  for (int j = 0; j < kG; ++j) acc[j] = 0.0f;

  for (int st = 0; st < kStagesPerChunk; ++st) {
    cp_async_wait<kRing - 2>();
    __syncthreads();  // stage st landed; slot (st + 3) % 4 (read at st - 1) is free
    load_stage(sm, a, st + kRing - 1, np);
    cp_async_commit();
    const float(*rows)[AttnSmem<HD>::kStride] = sm.ring[st % kRing];
    if (st < kStagesPerChunk / 2) {
      // Scores of positions 32 st + lane, virtual groups g = warp, warp + 8.
      const int i = st * kSub + lane;
      for (int g = warp; g < VG; g += kThreads / 32) {
        if (i < nps[g / G]) {
          float dot = 0.0f;
#pragma unroll 8
          for (int dd = 0; dd < HD; dd += 4) {
            const float4 k4 = *reinterpret_cast<const float4*>(&rows[lane][dd]);
            const float4 q4 = *reinterpret_cast<const float4*>(&sm.q[g][dd]);
            dot = __fmaf_rn(q4.x, k4.x, dot);
            dot = __fmaf_rn(q4.y, k4.y, dot);
            dot = __fmaf_rn(q4.z, k4.z, dot);
            dot = __fmaf_rn(q4.w, k4.w, dot);
          }
          sm.s[g][i] = __fmul_rn(dot, a.scale);
        } else {
          sm.s[g][i] = -INFINITY;
        }
      }
    } else {
      if (st == kStagesPerChunk / 2) {
        // All scores are in: softmax pieces, warp w takes virtual groups g = w, w + 8.
        for (int g = warp; g < VG; g += kThreads / 32) {
          const int npg = nps[g / G];
          float mx = -INFINITY;
#pragma unroll
          for (int j = 0; j < kChunk / 32; ++j) mx = fmaxf(mx, sm.s[g][lane + 32 * j]);
          mx = warp_max(mx);
          float sum = 0.0f;
#pragma unroll
          for (int j = 0; j < kChunk / 32; ++j) {
            const int i = lane + 32 * j;
            const float e = i < npg ? exp_f32(__fsub_rn(sm.s[g][i], mx)) : 0.0f;
            sm.s[g][i] = e;
            sum = __fadd_rn(sum, e);
          }
          sum = warp_sum(sum);
          if (lane == 0) sm.m[g] = mx, sm.l[g] = sum;
        }
        __syncthreads();
      }
      const int pb = (st - kStagesPerChunk / 2) * kSub;
      const int n = min(kSub, np - pb);
      int nj[kG];  // positions of this stage for each of the thread's virtual groups
#pragma unroll
      for (int j = 0; j < kG; ++j) {
        const int g = g0 + j * kGStride;
        nj[j] = g < VG ? min(kSub, nps[g / G] - pb) : 0;
      }
      for (int i = 0; i < n; ++i) {
        const float v = rows[i][d];
#pragma unroll
        for (int j = 0; j < kG; ++j) {
          const int g = g0 + j * kGStride;
          if (i < nj[j]) acc[j] = __fmaf_rn(sm.s[g][pb + i], v, acc[j]);
        }
      }
    }
  }
  cp_async_wait<0>();
}

// Queries of rows t0 .. t0 + nr - 1, head g of row r at virtual group r * G + g.
template <int HD>
__device__ __forceinline__ void load_queries(AttnSmem<HD>& sm, const AttnArgs& a, int t0, int nr,
                                             int kh) {
  for (int i = threadIdx.x; i < nr * a.group * HD; i += kThreads) {
    const int vg = i / HD, d = i % HD, r = vg / a.group, g = vg % a.group;
    sm.q[vg][d] = a.q[(static_cast<int64_t>(t0 + r) * a.n_heads + kh * a.group + g) * HD + d];
  }
}

// The online-softmax merge of one chunk into (M, L, A).
__device__ __forceinline__ void merge(float& M, float& L, float& A, float mc, float lc, float ac) {
  const float Mn = fmaxf(M, mc);
  const float alpha = exp_f32(__fsub_rn(M, Mn)), beta = exp_f32(__fsub_rn(mc, Mn));
  L = __fadd_rn(__fmul_rn(L, alpha), __fmul_rn(lc, beta));
  A = __fadd_rn(__fmul_rn(A, alpha), __fmul_rn(ac, beta));
  M = Mn;
}

// Split variant: block (c, t * n_kv_heads + kh) writes chunk c's partials.
template <int HD>
__global__ void __launch_bounds__(kThreads) attn_split(AttnArgs a) {
  extern __shared__ __align__(16) uint8_t raw[];
  auto& sm = *reinterpret_cast<AttnSmem<HD>*>(raw);
  const int c = blockIdx.x, t = blockIdx.y / a.n_kv_heads, kh = blockIdx.y % a.n_kv_heads;
  const int nk = a.n_keys[t];
  const int np = min(kChunk, nk - c * kChunk);
  if (np <= 0) return;
  load_queries(sm, a, t, 1, kh);
  float acc[AttnSmem<HD>::kGPerThread];
  chunk_partial(sm, a, t, kh, c, np, &np, 1, acc);
  const int d = threadIdx.x % HD, g0 = threadIdx.x / HD;
#pragma unroll
  for (int j = 0; j < AttnSmem<HD>::kGPerThread; ++j) {
    const int g = g0 + j * (kThreads / HD);
    if (g < a.group) {
      const int64_t idx = (static_cast<int64_t>(t) * a.n_heads + kh * a.group + g) * a.n_chunks + c;
      a.part_acc[idx * HD + d] = acc[j];
      if (d == 0) {
        a.part_ml[idx * 2] = sm.m[g];
        a.part_ml[idx * 2 + 1] = sm.l[g];
      }
    }
  }
}

// Merge of the split variant: block (t * n_heads + h), thread d.
template <int HD>
__global__ void __launch_bounds__(HD) attn_merge(AttnArgs a) {
  const int th = blockIdx.x, t = th / a.n_heads, d = threadIdx.x;
  const int nk = a.n_keys[t];
  const int nc = (nk + kChunk - 1) / kChunk;
  float M = -INFINITY, L = 0.0f, A = 0.0f;
  for (int c = 0; c < nc; ++c) {
    const int64_t idx = static_cast<int64_t>(th) * a.n_chunks + c;
    merge(M, L, A, a.part_ml[idx * 2], a.part_ml[idx * 2 + 1], a.part_acc[idx * HD + d]);
  }
  a.out[static_cast<int64_t>(th) * HD + d] = nk > 0 ? __fdiv_rn(A, L) : 0.0f;
}

// Rows t0 .. t0 + nr - 1 of one kv head (sharing their keys' locations) walk their chunks in
// order, each (row, head) merging only its own chunks.
template <int HD>
__device__ void walk_rows(AttnSmem<HD>& sm, const AttnArgs& a, int t0, int nr, int kh) {
  constexpr int kG = AttnSmem<HD>::kGPerThread;
  int nks[kMaxGroup], tref = t0, nc = 0;
  for (int r = 0; r < nr; ++r) {
    nks[r] = a.n_keys[t0 + r];
    if (nks[r] > a.n_keys[tref]) tref = t0 + r;
  }
  nc = (a.n_keys[tref] + kChunk - 1) / kChunk;
  load_queries(sm, a, t0, nr, kh);
  float M[kG], L[kG], A[kG];
#pragma unroll
  for (int j = 0; j < kG; ++j) M[j] = -INFINITY, L[j] = 0.0f, A[j] = 0.0f;
  const int d = threadIdx.x % HD, g0 = threadIdx.x / HD;
  const int VG = nr * a.group;
  for (int c = 0; c < nc; ++c) {
    int nps[kMaxGroup];
    for (int r = 0; r < nr; ++r) nps[r] = min(kChunk, nks[r] - c * kChunk);
    const int np = min(kChunk, a.n_keys[tref] - c * kChunk);
    float acc[kG];
    chunk_partial(sm, a, tref, kh, c, np, nps, nr, acc);
#pragma unroll
    for (int j = 0; j < kG; ++j) {
      const int g = g0 + j * (kThreads / HD);
      if (g < VG && nps[g / a.group] > 0) merge(M[j], L[j], A[j], sm.m[g], sm.l[g], acc[j]);
    }
    __syncthreads();  // before the next chunk overwrites shared memory
  }
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    const int g = g0 + j * (kThreads / HD);
    if (g < VG) {
      const int r = g / a.group, h = kh * a.group + g % a.group;
      a.out[(static_cast<int64_t>(t0 + r) * a.n_heads + h) * HD + d] =
          nks[r] > 0 ? __fdiv_rn(A[j], L[j]) : 0.0f;
    }
  }
  __syncthreads();  // shared memory is reused by a following walk_rows
}

// In-block variant: block (rb * n_kv_heads + kh) takes rows [rb R, rb R + R) (R = a.rows, R * G
// <= kMaxGroup) of kv head kh. When every row's block-table entries for its own keys equal those
// of the row with the most keys (rows of one sequence), the rows share each staged key and value
// (one pass); otherwise they are walked one at a time. Either way each (row, head) gets the
// single-row schedule, so the bits never depend on R or on the neighbours.
template <int HD>
__global__ void __launch_bounds__(kThreads) attn_walk(AttnArgs a, int T) {
  extern __shared__ __align__(16) uint8_t raw[];
  auto& sm = *reinterpret_cast<AttnSmem<HD>*>(raw);
  __shared__ int shared_ok;
  const int rb = blockIdx.x / a.n_kv_heads, kh = blockIdx.x % a.n_kv_heads;
  const int t0 = rb * a.rows;
  const int nr = min(a.rows, T - t0);
  if (nr > 1) {
    int tref = t0;
    for (int r = 1; r < nr; ++r)
      if (a.n_keys[t0 + r] > a.n_keys[tref]) tref = t0 + r;
    if (threadIdx.x == 0) shared_ok = 1;
    __syncthreads();
    const int bt = a.block_tokens;
    for (int r = 0; r < nr; ++r) {
      const int nb = (a.n_keys[t0 + r] + bt - 1) / bt;
      for (int b = threadIdx.x; b < nb; b += kThreads)
        if (a.block_tables[(t0 + r) * a.table_stride + b] != a.block_tables[tref * a.table_stride + b])
          shared_ok = 0;
    }
    __syncthreads();
    if (shared_ok) {
      walk_rows(sm, a, t0, nr, kh);
      return;
    }
  }
  for (int r = 0; r < nr; ++r) walk_rows(sm, a, t0 + r, 1, kh);
}

int rows_override = 0;  // testing::set_attention_rows_override

template <int HD>
void run(AttnArgs a, int64_t T) {
  constexpr int kSmem = static_cast<int>(sizeof(AttnSmem<HD>));
  static bool attrs = false;
  if (!attrs) {
    check(cudaFuncSetAttribute(attn_split<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
          "attention: set shared memory limit");
    check(cudaFuncSetAttribute(attn_walk<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
          "attention: set shared memory limit");
    attrs = true;
  }
  const int64_t pairs = T * a.n_kv_heads;
  if (pairs < 256 && a.n_chunks > 1) {
    const size_t rows = static_cast<size_t>(T) * a.n_heads * a.n_chunks;
    auto* buf = static_cast<float*>(scratch(1, rows * (HD + 2) * sizeof(float)));
    a.part_acc = buf;
    a.part_ml = buf + rows * HD;
    attn_split<HD><<<dim3(a.n_chunks, static_cast<unsigned>(pairs)), kThreads, kSmem, stream()>>>(a);
    check_launch("attention (chunk partials)");
    attn_merge<HD><<<static_cast<unsigned>(T * a.n_heads), HD, 0, stream()>>>(a);
    check_launch("attention (merge)");
  } else {
    a.rows = rows_override > 0 ? std::min(rows_override, kMaxGroup / a.group)
                               : kMaxGroup / a.group;
    const int64_t blocks = (T + a.rows - 1) / a.rows * a.n_kv_heads;
    attn_walk<HD><<<static_cast<unsigned>(blocks), kThreads, kSmem, stream()>>>(
        a, static_cast<int>(T));
    check_launch("attention (in-block)");
  }
}

}  // namespace

void attention(const float* q, int64_t T, const int32_t* block_tables, int64_t table_stride,
               const int32_t* n_keys, int64_t max_keys, int64_t n_heads, const KvLayerView& kv,
               float scale, float* out) {
  if (T <= 0) return;
  const int64_t hd = kv.head_dim;
  if (kv.n_kv_heads <= 0 || n_heads % kv.n_kv_heads != 0)
    fail("CUDA attention: ", n_heads, " query heads do not group over ", kv.n_kv_heads, " KV heads");
  const int64_t group = n_heads / kv.n_kv_heads;
  if (group > kMaxGroup)
    fail("CUDA attention: ", group, " query heads per KV head (at most ", kMaxGroup, " supported)");
  if (kv.block_tokens <= 0) fail("CUDA attention: block_tokens must be positive");
  AttnArgs a{};
  a.q = q;
  a.block_tables = block_tables;
  a.table_stride = table_stride;
  a.n_keys = n_keys;
  a.n_heads = static_cast<int>(n_heads);
  a.n_kv_heads = static_cast<int>(kv.n_kv_heads);
  a.group = static_cast<int>(group);
  a.block_tokens = static_cast<int>(kv.block_tokens);
  a.n_chunks = static_cast<int>(std::max<int64_t>(1, (max_keys + kChunk - 1) / kChunk));
  a.k = kv.k;
  a.v = kv.v;
  a.scale = scale;
  a.out = out;
  switch (hd) {
    case 64: run<64>(a, T); break;
    case 128: run<128>(a, T); break;
    case 256: run<256>(a, T); break;
    default: fail("CUDA attention: head_dim ", hd, " is not supported (64, 128 or 256)");
  }
}

namespace testing {
void set_attention_rows_override(int rows) { rows_override = rows; }
}  // namespace testing

}  // namespace lockstep::kernels::cuda
