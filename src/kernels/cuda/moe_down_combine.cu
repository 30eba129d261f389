// moe_down_combine (cuda_ops.h): a single token's expert down projections and their combination
// in one launch, for a batch-1 decode step's MoE layer (BF16 experts).
//
// The grouped down launch (linear_experts) gives each expert's row block its own block, so the
// combination of a token's k rows needs a launch of its own (moe_combine). Here one block owns 16
// output rows for every expert the token uses: it walks the experts one after another through one
// cp.async ring that never drains between them (the next expert's first stages load while the
// last ones of the current expert multiply), and at each expert's end merges its pieces and folds
// the expert into the combination in registers. Per expert the K walk is the skinny linear's
// exactly (linear_skinny.cuh: S = split_count(N, K) pieces of split_len(K, S) k, BK k a stage,
// m16n8k16 k-steps in increasing k from zero, x rounded to BF16 in the fragment, the pieces added
// in piece order), so each expert's row is bitwise the down launch's; the combination is
// moe_combine's: rank 0's weight times its row, each later rank's product added in rank order,
// then sigmoid(shared gate) times the shared expert's row. The shared expert (grouped as row k,
// expert E) is walked first, because its weights are known before the routing: its stages are
// requested before the PDL wait, and its row waits in registers for the end of the combination.
#include "kernels/cuda/linear_internal.cuh"
#include "kernels/cuda/linear_skinny.cuh"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/cuda/cuda_ops.h"

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;
using namespace lin;

constexpr int kBK = 128;                 // k per stage and piece
constexpr int kStages = 8;               // ring depth: 7 stages in flight per piece
constexpr int kWBytes = 16 * kBK * 2;    // a stage's 16 weight rows (BF16, swizzled)
constexpr int kXStride = kBK + 8;        // floats per staged x row (as the skinny kernel's)
constexpr int kPieceBytes = kWBytes + kXStride * 4;
constexpr int kMaxK = 32;                // experts per token (the routing's limit)

struct DownCombineArgs {
  const void* const* w;      // [E (+1)] the down weights (P = 1), the shared expert's at E
  const float* x;            // [rows][K] the grouped rows (SiLU·up of each expert's row)
  const int32_t* experts;    // [k] rank -> expert
  const float* weights;      // [k] rank -> combination weight
  const int32_t* slot;       // [k] rank -> grouped row
  const float* shared;       // [N] the shared expert's output when not grouped, else null
  const float* shared_gate;  // [1] or null (no shared expert)
  float* out;                // [N]
  int N, K, Ks, k, E;
  bool shared_row;           // the shared expert is grouped row k (expert E)
};

__host__ __device__ constexpr int ring_bytes(int S) { return kStages * S * kPieceBytes; }
__host__ __device__ constexpr int smem_bytes(int S) {
  return ring_bytes(S) + 2 * (S > 1 ? S - 1 : 1) * 4 * 32 * 4 + 2 * kMaxK * 4;
}

template <int S>
__global__ void __launch_bounds__(32 * S) moe_down_combine_kernel(const __grid_constant__ DownCombineArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, lane = tid & 31, piece = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = static_cast<int>(blockIdx.x) * 16;
  const int K = a.K, kbeg = piece * a.Ks, kend = min(K, kbeg + a.Ks);
  const int nk = (a.Ks + kBK - 1) / kBK;  // stages per expert (every piece alike)
  const int sh = a.shared_row ? 1 : 0;
  const int V = (a.k + sh) * nk;          // the walk: expert q's stage kc is v = q nk + kc
  const uint32_t base = smem_addr(smem);
  float* red = reinterpret_cast<float*>(smem + ring_bytes(S));
  int32_t* ids = reinterpret_cast<int32_t*>(smem + ring_bytes(S) + 2 * (S > 1 ? S - 1 : 1) * 512);
  int32_t* rows = ids + kMaxK;

  // Walk position q: the shared expert first when grouped, then ranks 0..k-1.
  auto load_w = [&](int stage, int v) {
    const int q = v / nk, kc = v % nk;
    const int e = q < sh ? a.E : ids[q - sh];
    const uint16_t* w = static_cast<const uint16_t*>(a.w[e]);
    const uint32_t ws = base + (stage * S + piece) * kPieceBytes;
    const int k0 = kbeg + kc * kBK;
#pragma unroll
    for (int i = 0; i < 16 * (kBK / 8) / 32; ++i) {
      const int idx = lane + 32 * i, r = idx / (kBK / 8), c = idx % (kBK / 8);
      const int gk = k0 + c * 8;
      const bool ok = (n0 + r < a.N) && (gk < kend);
      const uint16_t* src = ok ? w + static_cast<int64_t>(n0 + r) * K + gk : w;
      cp_async16(ws + swz(r, c, kBK * 2), src, ok);
    }
  };
  auto load_x = [&](int stage, int v) {
    const int q = v / nk, kc = v % nk;
    const int row = q < sh ? a.k : rows[q - sh];
    const uint32_t xs = base + (stage * S + piece) * kPieceBytes + kWBytes;
    stage_x_f32<kBK, 32>(xs, kXStride, a.x, row, K, kbeg + kc * kBK, kend, 1, lane);
  };
  // The shared expert's stages in the prologue (weights only) before the wait: nothing else is
  // read before it (common.cuh's PDL rule).
  pdl_launch_dependents();
  if (sh)
    for (int st = 0; st < kStages - 1 && st < nk; ++st) load_w(st, st);
  pdl_wait();
  if (tid < a.k) ids[tid] = a.experts[tid], rows[tid] = a.slot[tid];
  __syncthreads();
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < V) {
      if (st >= sh * nk) load_w(st, st);
      load_x(st, st);
    }
    cp_async_commit();
  }

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, comb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float shared_y[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int arow = (lane & 7) + ((lane >> 3) & 1) * 8, acol = lane >> 4;
  for (int v = 0; v < V; ++v) {
    cp_async_wait<kStages - 2>();
    // The piece's barrier (the skinny kernel's piece_sync; a piece is one warp here).
    asm volatile("bar.sync %0, 32;\n" ::"r"(1 + piece) : "memory");
    const int next = v + kStages - 1;
    if (next < V) {
      load_w(next % kStages, next);
      load_x(next % kStages, next);
    }
    cp_async_commit();
    // Stage v's k-steps (the skinny kernel's mma_stage at MT = 1, x as FP32 rows).
    const int stage = v % kStages, kc = v % nk;
    const uint32_t ws = base + (stage * S + piece) * kPieceBytes;
    const float* xf = reinterpret_cast<const float*>(smem + (stage * S + piece) * kPieceBytes + kWBytes);
    const int steps = max(0, min(kBK, kend - (kbeg + kc * kBK))) / 16;
    uint32_t af[kBK / 16][4], bf[kBK / 16][1][2];
#pragma unroll
    for (int s = 0; s < kBK / 16; ++s) {
      ldmatrix_x4(af[s], ws + swz(arow, s * 2 + acol, kBK * 2));
      x_f32_fragments<1>(xf + s * 16, kXStride, 1, g, t, bf[s]);
    }
#pragma unroll
    for (int s = 0; s < kBK / 16; ++s)
      if (s < steps) mma_bf16_16816(acc, af[s], bf[s][0][0], bf[s][0][1]);
    if (kc != nk - 1) continue;
    // The expert's end: its pieces merged in piece order into piece 0 (skinny_merge's order;
    // the exchange buffer alternates, so a piece never overwrites one piece 0 still reads),
    // then folded into the combination.
    const int q = v / nk;
    if constexpr (S > 1) {
      float* rb = red + (q & 1) * (S - 1) * 128;
      if (piece > 0)
#pragma unroll
        for (int e = 0; e < 4; ++e) rb[((piece - 1) * 4 + e) * 32 + lane] = acc[e];
      __syncthreads();
      if (piece == 0)
#pragma unroll
        for (int p = 1; p < S; ++p)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[e] = __fadd_rn(acc[e], rb[((p - 1) * 4 + e) * 32 + lane]);
    }
    if (piece == 0) {
      if (q < sh) {
#pragma unroll
        for (int e = 0; e < 4; ++e) shared_y[e] = acc[e];
      } else {
        const int j = q - sh;
        const float wj = a.weights[j];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          comb[e] = j == 0 ? __fmul_rn(wj, acc[e]) : __fadd_rn(comb[e], __fmul_rn(wj, acc[e]));
      }
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[e] = 0.0f;
  }
  cp_async_wait<0>();
  if (piece != 0 || t != 0) return;  // lanes with t = 0 hold token 0 (elements 0 and 2)
  const float gate = a.shared_gate ? sigmoid_f32(a.shared_gate[0]) : 0.0f;
#pragma unroll
  for (int e = 0; e < 4; e += 2) {
    const int n = n0 + g + (e >> 1) * 8;
    if (n >= a.N) continue;
    float v = comb[e];
    if (sh) v = __fadd_rn(v, __fmul_rn(gate, shared_y[e]));
    else if (a.shared) v = __fadd_rn(v, __fmul_rn(gate, a.shared[n]));
    a.out[n] = v;
  }
}

// LOCKSTEP_CUDA_DOWN_COMBINE=0: the down launch and moe_combine (the same bits; an A/B).
bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("LOCKSTEP_CUDA_DOWN_COMBINE");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

}  // namespace

bool moe_down_combine_fits(const ExpertTable& t, int64_t T, int64_t k) {
  if (!enabled() || T != 1 || t.P != 1 || k < 1 || k > kMaxK) return false;
  const Weight& w = t.shape;
  if (w.quant != QuantFormat::None || w.dtype != DType::BF16 || w.cols % 16 != 0) return false;
  return smem_bytes(split_count(w.rows, w.cols)) <= smem_optin();
}

void moe_down_combine(const ExpertTable& t, const float* x, const int32_t* experts,
                      const int32_t* slot, const float* weights, int64_t k, bool shared_row,
                      const float* shared, const float* shared_gate, float* out) {
  if (!moe_down_combine_fits(t, 1, k))
    fail("CUDA moe_down_combine: ", t.shape.rows, "x", t.shape.cols, " experts, top ", k,
         ": not a BF16 expert table of one projection this launch takes");
  if (shared_row && shared)
    fail("CUDA moe_down_combine: the shared expert is grouped and also given as an output");
  if ((shared_row || shared) && !shared_gate)
    fail("CUDA moe_down_combine: a shared expert without its gate");
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0)
    fail("CUDA moe_down_combine: x must be a 16-byte aligned device pointer");
  const int N = static_cast<int>(t.shape.rows), K = static_cast<int>(t.shape.cols);
  const int S = split_count(N, K);
  DownCombineArgs a{t.w, x, experts, weights, slot, shared, shared_gate, out, N, K,
                    split_len(K, S), static_cast<int>(k), static_cast<int>(t.E - shared_row),
                    shared_row};
  auto go = [&](auto s) {
    constexpr int SS = decltype(s)::value;
    constexpr auto kernel = moe_down_combine_kernel<SS>;
    allow_smem_max<kernel>();
    launch("moe_down_combine_kernel", kernel, dim3((N + 15) / 16), 32 * SS, smem_bytes(SS), a);
  };
  if (S == 4) go(std::integral_constant<int, 4>{});
  else if (S == 2) go(std::integral_constant<int, 2>{});
  else go(std::integral_constant<int, 1>{});
}

}  // namespace lockstep::kernels::cuda
