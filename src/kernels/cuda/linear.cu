// linear (cuda_ops.h): y[m][n] = sum_k x[m][k] W[n][k] (+ bias[n]) on BF16 tensor cores.
//
// The one schedule (every kernel below obeys it, whatever M is): the weights are the MMA's A
// operand (16 weight rows x 16 k), the activations its B operand (16 k x 8 tokens, rounded to
// bf16 nearest-even when loaded or converted). K is cut into S = split_count(N, K) pieces (1, 2
// or 4, from the weight's shape alone) of Ks = split_len(K, S) k; each output element has one
// FP32 accumulator per piece, starting at 0 and receiving mma.sync.m16n8k16 k-steps of that piece
// in increasing k (exactly its k/16 steps: no zero-padded steps); the pieces are added in piece
// order, ((a0 + a1) + a2) + a3, then + bias[n] (one FP32 add). An element's bits therefore
// depend only on its own x row, W row, N and K; the tiles below (how many weight rows and tokens
// a block covers, how many k a pipeline stage holds) are free. The pieces exist for decode: a
// 4096-row weight has only 256 sixteen-row tiles, too few dependent MMA chains to stream it.
//
// - skinny (M <= 64, decode and speculative verify): blocks of S pieces x 2 warps, 32 weight rows,
//   all the call's tokens (8 * MT, MT = 1, 2, 4, 8) per warp, each piece streamed through a
//   cp.async pipeline (64 k per piece per stage, 2 to 4 stages), fragments loaded ahead of the
//   MMAs; pieces 1.. hand their accumulators to piece 0 through shared memory. M <= 16 reads x
//   as FP32 and rounds it in the fragment (one launch); M > 16 first converts x to bf16 (one
//   small kernel) so the x tile costs half.
// - tiled (M > 64, prefill and mid-size batches): blocks of 128 weight rows x 256 tokens (8 warps
//   of 64 x 64), 128 x 128 (8 warps of 64 x 32) or 64 x 64 (4 warps of 32 x 32, 3 blocks per SM),
//   the largest that still gives about one block per SM; 64 k per stage, 4 stages, ldmatrix from
//   XOR-swizzled shared memory. The k chunks follow the pieces, and at each piece's end its
//   accumulator is flushed into y in piece order (first piece stores, later pieces add, the last
//   adds the bias), so y ends with the same ((a0 + a1) + a2) + a3 (+ bias) and only one register
//   set of accumulators is live.
// - linear_multi: weights that share x and S run in one launch (up to kMaxOuts): the blocks along
//   grid x are cut into each weight's row blocks in turn, and a block runs the one-weight code on
//   its weight (Outs / pick). Only addresses differ; every y keeps its separate linear()'s bits.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mma.cuh"

#include <vector>

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;

// Byte offset of 16-byte chunk c of row r in a tile whose rows are `row_bytes` long, XOR-swizzled
// so the 8 rows an ldmatrix reads hit 8 different bank groups.
__device__ __forceinline__ uint32_t swz(int r, int c, int row_bytes) {
  return static_cast<uint32_t>(r * row_bytes + ((c ^ (r & 7)) << 4));
}

// --- x to bf16 ------------------------------------------------------------------------------------
__global__ void to_bf16_kernel(const float* __restrict__ x, uint32_t* __restrict__ out, int64_t n2) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n2) {
    const float2 v = reinterpret_cast<const float2*>(x)[i];
    out[i] = pack_bf16x2(v.x, v.y);
  }
}

// --- the fixed split of K -----------------------------------------------------------------------
// S(N, K) pieces of Ks = ceil(K / 16 / S) * 16 k each (piece s: [s Ks, min(K, (s+1) Ks))), each
// with its own accumulator, summed in piece order at the end: ((a0 + a1) + a2) + a3. Chosen only
// from the weight's shape, so small-N layers get enough independent MMA chains to stream their
// weights at decode; every kernel below uses the same pieces for a given (N, K).
int split_count(int64_t N, int64_t K) {
  const int64_t tiles = (N + 15) / 16;
  int S = tiles >= 1024 ? 1 : (tiles >= 512 ? 2 : 4);
  while (S > 1 && K < 256 * S) S /= 2;
  return S;
}
int split_len(int64_t K, int S) { return static_cast<int>((K / 16 + S - 1) / S * 16); }

// --- the weights of one launch -------------------------------------------------------------------
// A launch covers up to kMaxOuts weights that share x (so K) and S: the blocks along grid x are
// the first weight's row blocks, then the second's, ... (end[i] = blocks of weights 0..i). A block
// finds its weight and then runs exactly the one-weight code on it: only addresses change, never
// the K walk, so every y is bitwise what a separate linear() of its weight gives.
constexpr int kMaxOuts = 4;
struct Outs {
  const uint16_t* w[kMaxOuts];
  const float* bias[kMaxOuts];
  float* y[kMaxOuts];
  int N[kMaxOuts];
  int end[kMaxOuts];
  int n;
};
struct Out1 {
  const uint16_t* w;
  const float* bias;
  float* y;
  int N;
  int bx;  // the block's index among its weight's row blocks
};
// MULTI = false: the launch has one weight (linear()), read straight from the parameters.
template <bool MULTI>
__device__ __forceinline__ Out1 pick(const Outs& o) {
  Out1 r{o.w[0], o.bias[0], o.y[0], o.N[0], static_cast<int>(blockIdx.x)};
  if constexpr (MULTI) {
#pragma unroll
    for (int i = 1; i < kMaxOuts; ++i)
      if (i < o.n && static_cast<int>(blockIdx.x) >= o.end[i - 1])
        r = Out1{o.w[i], o.bias[i], o.y[i], o.N[i], static_cast<int>(blockIdx.x) - o.end[i - 1]};
  }
  return r;
}

// --- skinny: M <= 64 ------------------------------------------------------------------------------
// Block: S pieces x 2 warps; warp (piece p, w) owns weight rows [16 w, 16 w + 16) of the block's 32
// and walks piece p's k. A stage holds 64 k of each piece.
constexpr int kSkBK = 64;                       // k per piece per stage
constexpr int kSkRows = 32;                     // weight rows per block (2 warps x 16)
constexpr int kSkWBytes = kSkRows * kSkBK * 2;  // 4 KiB per piece
constexpr int kSkXF32Stride = kSkBK + 8;        // floats per x row (conflict-free float2 reads)

template <int MT, bool XF32, int S>
struct Skinny {
  static constexpr int kXBytes = XF32 ? 8 * MT * kSkXF32Stride * 4 : 8 * MT * kSkBK * 2;
  static constexpr int kPieceBytes = kSkWBytes + kXBytes;
  static constexpr int kStageBytes = S * kPieceBytes;
  // Up to 4 stages within ~104 KiB (two blocks per SM); at least 3 when they fit in 220 KiB.
  static constexpr int kFit = (104 * 1024) / kStageBytes;
  static constexpr int kStages = kFit >= 4 ? 4 : (kFit == 3 || 3 * kStageBytes <= 220 * 1024 ? 3 : 2);
  static constexpr int kReduceBytes = (S - 1) * 2 * MT * 4 * 32 * 4;
  static constexpr int kSmem = kStages * kStageBytes > kReduceBytes ? kStages * kStageBytes : kReduceBytes;
  static constexpr int kThreads = 64 * S;
};

template <int MT, bool XF32, int S, bool MULTI>
__global__ void __launch_bounds__(64 * S) linear_skinny(const __grid_constant__ Outs outs,
                                                        const void* __restrict__ xv, int M, int K,
                                                        int Ks) {
  using C = Skinny<MT, XF32, S>;
  extern __shared__ __align__(128) uint8_t smem[];
  const Out1 o = pick<MULTI>(outs);
  const uint16_t* __restrict__ w = o.w;
  const float* __restrict__ bias = o.bias;
  float* __restrict__ y = o.y;
  const int N = o.N;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int piece = warp >> 1, wrow = warp & 1;
  const int ptid = tid & 63;  // thread index within the piece's 2 warps
  const int n0 = o.bx * kSkRows;
  const int m0 = blockIdx.y * 8 * MT;
  const int kbeg = piece * Ks, kend = min(K, kbeg + Ks);
  const int nk = (Ks + kSkBK - 1) / kSkBK;  // stages (the same for every piece)
  const uint32_t base = smem_addr(smem);

  // Each piece's 64 threads load that piece's 64 k of the stage.
  auto load = [&](int stage, int chunk) {
    const uint32_t ws = base + stage * C::kStageBytes + piece * C::kPieceBytes;
    const int k0 = kbeg + chunk * kSkBK;
#pragma unroll
    for (int i = 0; i < kSkRows * (kSkBK / 8) / 64; ++i) {
      const int idx = ptid + 64 * i, r = idx >> 3, c = idx & 7;
      const int gk = k0 + c * 8;
      const bool ok = (n0 + r < N) && (gk < kend);
      const uint16_t* src = ok ? w + static_cast<int64_t>(n0 + r) * K + gk : w;
      cp_async16(ws + swz(r, c, kSkBK * 2), src, ok);
    }
    const uint32_t xs = ws + kSkWBytes;
    if constexpr (XF32) {
      const float* x = static_cast<const float*>(xv);
#pragma unroll
      for (int i = 0; i < 8 * MT * (kSkBK / 4) / 64; ++i) {
        const int idx = ptid + 64 * i, r = idx >> 4, c = idx & 15;
        const int gk = k0 + c * 4;
        const bool ok = (m0 + r < M) && (gk < kend);
        const float* src = ok ? x + static_cast<int64_t>(m0 + r) * K + gk : x;
        cp_async16(xs + (r * kSkXF32Stride + c * 4) * 4, src, ok);
      }
    } else {
      const uint16_t* x = static_cast<const uint16_t*>(xv);
#pragma unroll
      for (int i = 0; i < 8 * MT * (kSkBK / 8) / 64; ++i) {
        const int idx = ptid + 64 * i, r = idx >> 3, c = idx & 7;
        const int gk = k0 + c * 8;
        const bool ok = (m0 + r < M) && (gk < kend);
        const uint16_t* src = ok ? x + static_cast<int64_t>(m0 + r) * K + gk : x;
        cp_async16(xs + swz(r, c, kSkBK * 2), src, ok);
      }
    }
  };

  float acc[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

#pragma unroll
  for (int st = 0; st < C::kStages - 1; ++st) {
    if (st < nk) load(st, st);
    cp_async_commit();
  }

  const int g = lane >> 2, t = lane & 3;
  const int arow = wrow * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;  // A ldmatrix row
  const int acol = lane >> 4;                                       // A ldmatrix k half
  for (int kc = 0; kc < nk; ++kc) {
    cp_async_wait<C::kStages - 2>();
    __syncthreads();
    {
      const int next = kc + C::kStages - 1;
      if (next < nk) load(next % C::kStages, next);
      cp_async_commit();
    }
    const int soff = (kc % C::kStages) * C::kStageBytes + piece * C::kPieceBytes;
    const uint32_t ws = base + soff;
    const uint32_t xs = ws + kSkWBytes;
    const float* xf = reinterpret_cast<const float*>(smem + soff + kSkWBytes);
    const int steps = max(0, min(kSkBK, kend - (kbeg + kc * kSkBK))) / 16;
    uint32_t a[kSkBK / 16][4], b[kSkBK / 16][MT][2];
#pragma unroll
    for (int s = 0; s < kSkBK / 16; ++s) {
      ldmatrix_x4(a[s], ws + swz(arow, s * 2 + acol, kSkBK * 2));
      if constexpr (XF32) {
#pragma unroll
        for (int j = 0; j < MT; ++j) {
          const float* row = xf + (j * 8 + g) * kSkXF32Stride + s * 16 + 2 * t;
          const float2 v0 = *reinterpret_cast<const float2*>(row);
          const float2 v1 = *reinterpret_cast<const float2*>(row + 8);
          b[s][j][0] = pack_bf16x2(v0.x, v0.y);
          b[s][j][1] = pack_bf16x2(v1.x, v1.y);
        }
      } else {
#pragma unroll
        for (int jj = 0; jj < MT / 2; ++jj) {
          uint32_t r4[4];
          const int r = jj * 16 + (lane & 7) + (lane >> 4) * 8;
          ldmatrix_x4(r4, xs + swz(r, s * 2 + ((lane >> 3) & 1), kSkBK * 2));
          b[s][2 * jj][0] = r4[0], b[s][2 * jj][1] = r4[1];
          b[s][2 * jj + 1][0] = r4[2], b[s][2 * jj + 1][1] = r4[3];
        }
      }
    }
    // MMAs in increasing k (fragments past `steps` hold stale data and are not used).
#pragma unroll
    for (int s = 0; s < kSkBK / 16; ++s)
      if (s < steps) {
#pragma unroll
        for (int j = 0; j < MT; ++j) mma_bf16_16816(acc[j], a[s], b[s][j][0], b[s][j][1]);
      }
  }
  cp_async_wait<0>();

  if constexpr (S > 1) {
    // Pieces 1.. hand their accumulators to piece 0, which adds them in piece order.
    __syncthreads();  // every warp is done with the pipeline's shared memory
    float* red = reinterpret_cast<float*>(smem);
    auto slot = [&](int p, int j, int e) { return (((p - 1) * 2 + wrow) * MT + j) * 4 * 32 + e * 32 + lane; };
    if (piece > 0) {
#pragma unroll
      for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) red[slot(piece, j, e)] = acc[j][e];
    }
    __syncthreads();
    if (piece > 0) return;
#pragma unroll
    for (int p = 1; p < S; ++p)
#pragma unroll
      for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] = __fadd_rn(acc[j][e], red[slot(p, j, e)]);
  }

#pragma unroll
  for (int j = 0; j < MT; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int n = n0 + wrow * 16 + g + (e >> 1) * 8;
      const int m = m0 + j * 8 + 2 * t + (e & 1);
      if (n < N && m < M) {
        float v = acc[j][e];
        if (bias) v = __fadd_rn(v, bias[n]);
        y[static_cast<int64_t>(m) * N + n] = v;
      }
    }
  }
}

// --- tiled: M > 64 --------------------------------------------------------------------------------
// Block: BN weight rows x BM tokens, warps of WN x WM, 64 k per stage. The k chunks follow the
// pieces: piece p is walked in chunks of 64 k starting at p Ks (the last chunk of a piece may hold
// fewer 16-k steps; none is zero-padded), and when a piece's last chunk is done its accumulator is
// flushed into y in piece order: piece 0 stores, piece p > 0 stores y + a_p (one FP32 add), the
// last piece then adds the bias. Each element is read and written by the one thread that owns it,
// so y holds exactly ((a0 + a1) + a2) + a3 (+ bias), the skinny kernel's merge, and only one
// accumulator set is live.
constexpr int kTBK = 64;
constexpr int kTRowBytes = kTBK * 2;  // 128 B

template <int BN, int BM, int WN, int WM, int STAGES, int MINB>
struct Tiled {
  static constexpr int kWarpsN = BN / WN, kWarpsM = BM / WM;
  static constexpr int kThreads = kWarpsN * kWarpsM * 32;
  static constexpr int kStageBytes = (BN + BM) * kTRowBytes;
  static constexpr int kSmem = STAGES * kStageBytes;
  static constexpr int kIA = WN / 16;  // A fragments (16 weight rows) per warp
  static constexpr int kJB = WM / 8;   // n8 token tiles per warp
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile");
  static_assert((BN * 8) % kThreads == 0 && (BM * 8) % kThreads == 0, "load split");
};

template <int BN, int BM, int WN, int WM, int STAGES, int MINB, bool MULTI>
__global__ void __launch_bounds__(Tiled<BN, BM, WN, WM, STAGES, MINB>::kThreads, MINB)
    linear_tiled(const __grid_constant__ Outs outs, const uint16_t* __restrict__ x, int M, int K,
                 int Ks, int S) {
  using C = Tiled<BN, BM, WN, WM, STAGES, MINB>;
  constexpr int IA = C::kIA, JB = C::kJB;
  extern __shared__ __align__(128) uint8_t smem[];
  const Out1 o = pick<MULTI>(outs);
  const uint16_t* __restrict__ w = o.w;
  const float* __restrict__ bias = o.bias;
  float* __restrict__ y = o.y;
  const int N = o.N;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wn = warp % C::kWarpsN, wm = warp / C::kWarpsN;
  const int n0 = o.bx * BN, m0 = blockIdx.y * BM;
  const int nkp = (Ks + kTBK - 1) / kTBK;  // chunks per piece
  const int nk = S * nkp;
  const uint32_t base = smem_addr(smem);

  auto load = [&](int stage, int chunk) {
    const uint32_t ws = base + stage * C::kStageBytes;
    const uint32_t xs = ws + BN * kTRowBytes;
    const int p = chunk / nkp;
    const int k0 = p * Ks + (chunk - p * nkp) * kTBK;
    const int kend = min(K, p * Ks + Ks);
#pragma unroll
    for (int i = 0; i < BN * 8 / C::kThreads; ++i) {
      const int idx = tid + C::kThreads * i, r = idx >> 3, c = idx & 7;
      const int gk = k0 + c * 8;
      const bool ok = (n0 + r < N) && (gk < kend);
      cp_async16(ws + swz(r, c, kTRowBytes), ok ? w + static_cast<int64_t>(n0 + r) * K + gk : w, ok);
    }
#pragma unroll
    for (int i = 0; i < BM * 8 / C::kThreads; ++i) {
      const int idx = tid + C::kThreads * i, r = idx >> 3, c = idx & 7;
      const int gk = k0 + c * 8;
      const bool ok = (m0 + r < M) && (gk < kend);
      cp_async16(xs + swz(r, c, kTRowBytes), ok ? x + static_cast<int64_t>(m0 + r) * K + gk : x, ok);
    }
  };

  float acc[IA][JB][4];
#pragma unroll
  for (int i = 0; i < IA; ++i)
#pragma unroll
    for (int j = 0; j < JB; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

  const int g = lane >> 2, t = lane & 3;
  // Piece p done: y = a_0 (p = 0) or y + a_p; + bias after the last piece; acc = 0.
  auto flush = [&](int p) {
    // N and M through an opaque move, so the compiler cannot hoist this epilogue's addresses out
    // of the k loop (they would hold registers for the whole walk and spill).
    int Nf, Mf;
    asm volatile("mov.b32 %0, %1;" : "=r"(Nf) : "r"(N));
    asm volatile("mov.b32 %0, %1;" : "=r"(Mf) : "r"(M));
    const int nb = n0 + wn * WN + g, mb = m0 + wm * WM + 2 * t;
    // All loads of y first (acc = y + a_p), then all stores: a load placed after a store that
    // might alias it (the compiler cannot tell, with N opaque) would wait a full L2 round trip
    // per element.
    if (p > 0) {
#pragma unroll
      for (int i = 0; i < IA; ++i)
#pragma unroll
        for (int j = 0; j < JB; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int n = nb + i * 16 + (e >> 1) * 8, m = mb + j * 8 + (e & 1);
            if (n < Nf && m < Mf)
              acc[i][j][e] = __fadd_rn(y[static_cast<int64_t>(m) * Nf + n], acc[i][j][e]);
          }
    }
#pragma unroll
    for (int i = 0; i < IA; ++i)
#pragma unroll
      for (int j = 0; j < JB; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int n = nb + i * 16 + (e >> 1) * 8, m = mb + j * 8 + (e & 1);
          if (n < Nf && m < Mf) {
            float v = acc[i][j][e];
            if (p == S - 1 && bias) v = __fadd_rn(v, bias[n]);
            y[static_cast<int64_t>(m) * Nf + n] = v;
          }
          acc[i][j][e] = 0.0f;
        }
  };

  auto step = [&](uint32_t ws, uint32_t xs, int s) {
    uint32_t a[IA][4], b[JB / 2][4];
#pragma unroll
    for (int i = 0; i < IA; ++i) {
      const int r = wn * WN + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
      ldmatrix_x4(a[i], ws + swz(r, s * 2 + (lane >> 4), kTRowBytes));
    }
#pragma unroll
    for (int jj = 0; jj < JB / 2; ++jj) {
      const int r = wm * WM + jj * 16 + (lane & 7) + (lane >> 4) * 8;
      ldmatrix_x4(b[jj], xs + swz(r, s * 2 + ((lane >> 3) & 1), kTRowBytes));
    }
#pragma unroll
    for (int i = 0; i < IA; ++i)
#pragma unroll
      for (int j = 0; j < JB; ++j)
        mma_bf16_16816(acc[i][j], a[i], b[j >> 1][(j & 1) * 2], b[j >> 1][(j & 1) * 2 + 1]);
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nk) load(s, s);
    cp_async_commit();
  }
  int p = 0, cc = 0;  // piece and chunk within it of chunk kc
  for (int kc = 0; kc < nk; ++kc) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    {
      const int next = kc + STAGES - 1;
      if (next < nk) load(next % STAGES, next);
      cp_async_commit();
    }
    const uint32_t ws = base + (kc % STAGES) * C::kStageBytes;
    const uint32_t xs = ws + BN * kTRowBytes;
    const int k0 = p * Ks + cc * kTBK;
    const int steps = max(0, min(kTBK, min(K, p * Ks + Ks) - k0)) / 16;
    if (steps == kTBK / 16) {
#pragma unroll
      for (int s = 0; s < kTBK / 16; ++s) step(ws, xs, s);
    } else {
#pragma unroll 1
      for (int s = 0; s < steps; ++s) step(ws, xs, s);
    }
    if (++cc == nkp) {
      flush(p);
      ++p, cc = 0;
    }
  }
  cp_async_wait<0>();
}

// The tile configurations (all walk K alike; the choice is free).
using TileBig = Tiled<128, 256, 64, 64, 4, 1>;    // 8 warps of 64 x 64, 192 KiB
using TileMid = Tiled<128, 128, 64, 32, 4, 1>;    // 8 warps of 64 x 32, 128 KiB
using TileSmall = Tiled<64, 64, 32, 32, 4, 3>;    // 4 warps of 32 x 32, 64 KiB, 3 blocks per SM

int tile_override = 0;  // testing::set_linear_tile_override

// Raises a kernel's dynamic shared-memory limit, once per kernel (the static lives in each
// instantiation of this template, one per kernel).
template <auto Kernel>
void allow_smem(int bytes) {
  static const bool done = [&] {
    check(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
          "linear: set shared memory limit");
    return true;
  }();
  (void)done;
}

// One launch's weights (all with the same K and S): the table the kernels read, with the block
// ends filled in for `rows` weight rows per block.
struct Group {
  Outs o{};
  int total_n = 0;  // the weights' rows together
  void add(const uint16_t* w, const float* bias, float* y, int N) {
    o.w[o.n] = w, o.bias[o.n] = bias, o.y[o.n] = y, o.N[o.n] = N;
    ++o.n;
    total_n += N;
  }
  int blocks(int rows) const {  // along grid x
    int b = 0;
    for (int i = 0; i < o.n; ++i) b += (o.N[i] + rows - 1) / rows;
    return b;
  }
  Outs table(int rows) const {
    Outs t = o;
    int b = 0;
    for (int i = 0; i < o.n; ++i) t.end[i] = b += (o.N[i] + rows - 1) / rows;
    return t;
  }
};

template <int MT, bool XF32, int S, bool MULTI>
void launch_skinny3(const Group& g, const void* x, int M, int K, int Ks) {
  using C = Skinny<MT, XF32, S>;
  constexpr auto kernel = linear_skinny<MT, XF32, S, MULTI>;
  allow_smem<kernel>(C::kSmem);
  const dim3 grid(g.blocks(kSkRows), (M + 8 * MT - 1) / (8 * MT));
  kernel<<<grid, C::kThreads, C::kSmem, stream()>>>(g.table(kSkRows), x, M, K, Ks);
  check_launch("linear (skinny kernel)");
}

template <int MT, bool XF32, bool MULTI>
void launch_skinny2(const Group& g, const void* x, int M, int K, int S) {
  const int Ks = split_len(K, S);
  if (S == 4) launch_skinny3<MT, XF32, 4, MULTI>(g, x, M, K, Ks);
  else if (S == 2) launch_skinny3<MT, XF32, 2, MULTI>(g, x, M, K, Ks);
  else launch_skinny3<MT, XF32, 1, MULTI>(g, x, M, K, Ks);
}

template <int MT, bool XF32>
void launch_skinny(const Group& g, const void* x, int M, int K, int S) {
  if (g.o.n > 1) launch_skinny2<MT, XF32, true>(g, x, M, K, S);
  else launch_skinny2<MT, XF32, false>(g, x, M, K, S);
}

template <typename C, int BN, int BM, int WN, int WM, int STAGES, int MINB, bool MULTI>
void launch_tiled3(const Group& g, const uint16_t* x, int M, int K, int Ks, int S) {
  constexpr auto kernel = linear_tiled<BN, BM, WN, WM, STAGES, MINB, MULTI>;
  allow_smem<kernel>(C::kSmem);
  const dim3 grid(g.blocks(BN), (M + BM - 1) / BM);
  kernel<<<grid, C::kThreads, C::kSmem, stream()>>>(g.table(BN), x, M, K, Ks, S);
  check_launch("linear (tiled kernel)");
}

template <typename C, int BN, int BM, int WN, int WM, int STAGES, int MINB>
void launch_tiled_cfg(const Group& g, const uint16_t* x, int M, int K, int Ks, int S) {
  if (g.o.n > 1) launch_tiled3<C, BN, BM, WN, WM, STAGES, MINB, true>(g, x, M, K, Ks, S);
  else launch_tiled3<C, BN, BM, WN, WM, STAGES, MINB, false>(g, x, M, K, Ks, S);
}

int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    check(cudaGetDevice(&dev), "linear: get device");
    check(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev), "linear: SM count");
    return v > 0 ? v : 1;
  }();
  return n;
}

// The largest tile that still gives about one block per multiprocessor (a free choice: every
// configuration gives the same bits).
void launch_tiled(const Group& g, const uint16_t* x, int M, int K, int S) {
  const int Ks = split_len(K, S);
  auto blocks = [&](int bn, int bm) {
    return static_cast<int64_t>(g.blocks(bn)) * ((M + bm - 1) / bm);
  };
  const int64_t want = sm_count() * 9 / 10;
  int pick = tile_override;
  if (pick == 0) pick = blocks(128, 256) >= want ? 1 : (blocks(128, 128) >= want ? 2 : 3);
  if (pick == 1)
    launch_tiled_cfg<TileBig, 128, 256, 64, 64, 4, 1>(g, x, M, K, Ks, S);
  else if (pick == 2)
    launch_tiled_cfg<TileMid, 128, 128, 64, 32, 4, 1>(g, x, M, K, Ks, S);
  else
    launch_tiled_cfg<TileSmall, 64, 64, 32, 32, 4, 3>(g, x, M, K, Ks, S);
}

// Checks a weight for the kernels above (N, K within int; BF16, 16-byte aligned).
void check_weight(const Weight& w, int64_t M) {
  if (w.quant != QuantFormat::None)
    fail("CUDA linear: quantized weights are not supported (the backend dequantizes them to BF16)");
  if (w.dtype != DType::BF16)
    fail("CUDA linear: weight dtype ", dtype_name(w.dtype), " is not supported (expected BF16)");
  const int64_t N = w.rows, K = w.cols;
  if (K % 16 != 0) fail("CUDA linear: K = ", K, " is not a multiple of 16");
  if (N <= 0 || K <= 0 || M < 0) fail("CUDA linear: bad shape M=", M, " N=", N, " K=", K);
  if (M > (int64_t{1} << 30) || N > (int64_t{1} << 30) || K > (int64_t{1} << 30))
    fail("CUDA linear: shape too large M=", M, " N=", N, " K=", K);
  if (reinterpret_cast<uintptr_t>(w.data) % 16 != 0)
    fail("CUDA linear: the weights must be 16-byte aligned device pointers");
}

// The groups of one call: each weight joins the first group of its S with room, else opens one
// (call order within a group; launch order between groups is free).
std::vector<Group> groups_of(const LinearOut* outs, int64_t n) {
  std::vector<Group> gs;
  std::vector<int> group_s;
  for (int64_t i = 0; i < n; ++i) {
    const Weight& w = *outs[i].w;
    const int S = split_count(w.rows, w.cols);
    size_t at = 0;
    while (at < gs.size() && !(group_s[at] == S && gs[at].o.n < kMaxOuts)) ++at;
    if (at == gs.size()) {
      gs.emplace_back();
      group_s.push_back(S);
    }
    gs[at].add(static_cast<const uint16_t*>(w.data), outs[i].bias, outs[i].y,
               static_cast<int>(w.rows));
  }
  return gs;
}

// Runs every group against x (each y bitwise a separate linear()): x read as FP32 by the skinny
// kernels for M <= 16, else converted to bf16 once for all groups.
void run_groups(const float* x, int64_t M, int64_t K, const std::vector<Group>& gs) {
  if (M == 0 || gs.empty()) return;
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0)
    fail("CUDA linear: x must be a 16-byte aligned device pointer");
  const int m = static_cast<int>(M), k = static_cast<int>(K);
  auto S_of = [&](const Group& g) { return split_count(g.o.N[0], K); };
  if (M <= 8) {
    for (const Group& g : gs) launch_skinny<1, true>(g, x, m, k, S_of(g));
    return;
  }
  if (M <= 16) {
    for (const Group& g : gs) launch_skinny<2, true>(g, x, m, k, S_of(g));
    return;
  }
  auto* xb = static_cast<uint16_t*>(scratch(0, static_cast<size_t>(M * K) * 2));
  {
    const int64_t n2 = M * K / 2;
    to_bf16_kernel<<<blocks_for(n2, 256), 256, 0, stream()>>>(x, reinterpret_cast<uint32_t*>(xb), n2);
    check_launch("linear (bf16 conversion)");
  }
  for (const Group& g : gs) {
    if (M <= 32) launch_skinny<4, false>(g, xb, m, k, S_of(g));
    else if (M <= 64) launch_skinny<8, false>(g, xb, m, k, S_of(g));
    else launch_tiled(g, xb, m, k, S_of(g));
  }
}

}  // namespace

void linear(const float* x, int64_t M, const Weight& w, const float* bias, float* y) {
  check_weight(w, M);
  if (M == 0) return;
  const LinearOut one{&w, bias, y};
  run_groups(x, M, w.cols, groups_of(&one, 1));
}

void linear_multi(const float* x, int64_t M, const LinearOut* outs, int64_t n) {
  if (n <= 0) return;
  const int64_t K = outs[0].w->cols;
  for (int64_t i = 0; i < n; ++i) {
    check_weight(*outs[i].w, M);
    if (outs[i].w->cols != K)
      fail("CUDA linear_multi: weight ", i, " has K = ", outs[i].w->cols, ", the first has ", K);
  }
  if (M == 0) return;
  run_groups(x, M, K, groups_of(outs, n));
}

namespace testing {
void set_linear_tile_override(int tile) { tile_override = tile; }
}  // namespace testing

}  // namespace lockstep::kernels::cuda
