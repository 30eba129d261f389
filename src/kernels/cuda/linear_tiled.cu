// linear (cuda_ops.h), the tiled kernels for M > 64 (prefill and mid-size batches): the same
// K walk as every other linear kernel (linear.cu states it). On compute capability 9.0 (H100/H200)
// launch_tiled hands M > 64 to the wgmma kernel (linear_wgmma.cu, 2-2.5x these on the H200, same
// bits); these mma.sync tiles remain the path elsewhere, with LOCKSTEP_CUDA_WGMMA=0, and under
// testing::set_linear_tile_override(-1 or 1..3).
#include "kernels/cuda/linear_internal.cuh"

#include <cstdlib>
#include <string>

namespace lockstep::kernels::cuda {
namespace lin {
namespace {

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

// One block's tile: weight rows [n0, n0 + BN) of w ([N][K] bf16) against tokens [m0, m0 + BM) of
// x ([M][K] bf16), into y ([M][N]). The kernels below only choose w, x, y, n0 and m0.
template <int BN, int BM, int WN, int WM, int STAGES, int MINB>
__device__ __forceinline__ void tiled_body(const uint16_t* __restrict__ w,
                                           const float* __restrict__ bias, float* __restrict__ y,
                                           int N, int n0, const uint16_t* __restrict__ x, int M,
                                           int m0, int K, int Ks, int S) {
  using C = Tiled<BN, BM, WN, WM, STAGES, MINB>;
  constexpr int IA = C::kIA, JB = C::kJB;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wn = warp % C::kWarpsN, wm = warp / C::kWarpsN;
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

template <int BN, int BM, int WN, int WM, int STAGES, int MINB, bool MULTI>
__global__ void __launch_bounds__(Tiled<BN, BM, WN, WM, STAGES, MINB>::kThreads, MINB)
    linear_tiled(const __grid_constant__ Outs outs, const uint16_t* __restrict__ x, int M, int K,
                 int Ks, int S) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const Out1 o = pick<MULTI>(outs);
  tiled_body<BN, BM, WN, WM, STAGES, MINB>(o.w, o.bias, o.y, o.N, o.bx * BN, x, M,
                                           static_cast<int>(blockIdx.y) * BM, K, Ks, S);
}

// The grouped expert form (linear_internal.cuh: launch_tiled_experts): grid x = the weight's row
// blocks, y = BM-token tiles of an expert's rows, z = (active-expert slot, projection). A block
// runs the tile of its expert's weight (expert_block) against xb and y at the expert's first row,
// with M = its rows: linear()'s tile of those rows alone, so the same bits.
template <int BN, int BM, int WN, int WM, int STAGES, int MINB>
__global__ void __launch_bounds__(Tiled<BN, BM, WN, WM, STAGES, MINB>::kThreads, MINB)
    linear_tiled_experts(const __grid_constant__ ExpertArgs a, const uint16_t* __restrict__ xb,
                         int S) {
  pdl_launch_dependents();
  pdl_wait();  // the groups table and xb are written by the kernels before
  ExpertBlock b;
  if (!expert_block(a, BM, b)) return;
  tiled_body<BN, BM, WN, WM, STAGES, MINB>(
      static_cast<const uint16_t*>(a.w[b.e * a.P + b.p]), nullptr,
      a.y[b.p] + static_cast<int64_t>(b.first) * a.N, a.N, static_cast<int>(blockIdx.x) * BN,
      xb + static_cast<int64_t>(b.first) * a.K, b.rows, static_cast<int>(blockIdx.y) * BM, a.K,
      a.Ks, S);
}

// The tile configurations (all walk K alike; the choice is free).
using TileBig = Tiled<128, 256, 64, 64, 4, 1>;    // 8 warps of 64 x 64, 192 KiB
using TileMid = Tiled<128, 128, 64, 32, 4, 1>;    // 8 warps of 64 x 32, 128 KiB
using TileSmall = Tiled<64, 64, 32, 32, 4, 3>;    // 4 warps of 32 x 32, 64 KiB, 3 blocks per SM

int tile_override = 0;  // testing::set_linear_tile_override

template <typename C, int BN, int BM, int WN, int WM, int STAGES, int MINB, bool MULTI>
void launch_tiled3(const Group& g, const uint16_t* x, int M, int K, int Ks, int S) {
  constexpr auto kernel = linear_tiled<BN, BM, WN, WM, STAGES, MINB, MULTI>;
  allow_smem<kernel>(C::kSmem);
  const dim3 grid(g.blocks(BN), (M + BM - 1) / BM);
  launch("linear (tiled kernel)", kernel, grid, C::kThreads, C::kSmem, g.table(BN), x, M, K, Ks, S);
}

template <typename C, int BN, int BM, int WN, int WM, int STAGES, int MINB>
void launch_tiled_cfg(const Group& g, const uint16_t* x, int M, int K, int Ks, int S) {
  if (g.o.n > 1) launch_tiled3<C, BN, BM, WN, WM, STAGES, MINB, true>(g, x, M, K, Ks, S);
  else launch_tiled3<C, BN, BM, WN, WM, STAGES, MINB, false>(g, x, M, K, Ks, S);
}

}  // namespace

// The largest tile that still gives about one block per multiprocessor (a free choice: every
// configuration gives the same bits).
void launch_tiled(const Group& g, const uint16_t* x, int M, int K, int S) {
  // The wgmma kernel unless an mma.sync tile is forced (1..3) or its rule is asked for (-1).
  if (tile_override == 0 || tile_override >= 4) {
    if (wgmma_available() && wgmma_fits(g, x, K)) return launch_wgmma(g, x, M, K, S, tile_override);
    if (tile_override >= 4) fail("CUDA linear: the wgmma kernel was forced but cannot run here");
  }
  const int Ks = split_len(K, S);
  auto blocks = [&](int bn, int bm) {
    return static_cast<int64_t>(g.blocks(bn)) * ((M + bm - 1) / bm);
  };
  const int64_t want = sm_count() * 9 / 10;
  int pick = tile_override > 0 ? tile_override : 0;
  if (pick == 0) pick = blocks(128, 256) >= want ? 1 : (blocks(128, 128) >= want ? 2 : 3);
  // A tile the device's shared memory does not hold gives way to the next smaller one (64 KiB
  // fits every supported device): 163 KiB (sm_80) takes the 128 KiB tile, 99 KiB (sm_86 / sm_89 /
  // sm_120) the 64 KiB one. A forced tile is a request, the same rule applies.
  const int smem = device_caps().smem_optin;
  if (pick == 1 && TileBig::kSmem > smem) pick = 2;
  if (pick == 2 && TileMid::kSmem > smem) pick = 3;
  if (pick == 1)
    launch_tiled_cfg<TileBig, 128, 256, 64, 64, 4, 1>(g, x, M, K, Ks, S);
  else if (pick == 2)
    launch_tiled_cfg<TileMid, 128, 128, 64, 32, 4, 1>(g, x, M, K, Ks, S);
  else
    launch_tiled_cfg<TileSmall, 64, 64, 32, 32, 4, 3>(g, x, M, K, Ks, S);
}

namespace {
template <typename C, int BN, int BM, int WN, int WM, int STAGES, int MINB>
void launch_tiled_experts_cfg(const ExpertArgs& a, const uint16_t* xb, int S, int max_rows,
                              int slots) {
  constexpr auto kernel = linear_tiled_experts<BN, BM, WN, WM, STAGES, MINB>;
  allow_smem<kernel>(C::kSmem);
  const dim3 grid((a.N + BN - 1) / BN, (max_rows + BM - 1) / BM, slots * a.P);
  launch("linear_experts (tiled kernel)", kernel, grid, C::kThreads, C::kSmem, a, xb, S);
}
}  // namespace

void launch_tiled_experts(const ExpertArgs& a, const uint16_t* xb, int S, int max_rows, int slots) {
  // 128 weight rows x 128 tokens: an expert of a prefill chunk holds about T k / E rows (128 for
  // 2048 tokens of Qwen3-30B-A3B), which the 256-token tile would half waste. The 64 KiB tile
  // where the device's shared memory does not hold 128 KiB (sm_86 / sm_89 / sm_120, as
  // launch_tiled), or where a test forces tile 3. A free choice: the same bits.
  if (tile_override != 3 && TileMid::kSmem <= device_caps().smem_optin)
    launch_tiled_experts_cfg<TileMid, 128, 128, 64, 32, 4, 1>(a, xb, S, max_rows, slots);
  else
    launch_tiled_experts_cfg<TileSmall, 64, 64, 32, 32, 4, 3>(a, xb, S, max_rows, slots);
}

bool wgmma_for_batch(const Group& g, const uint16_t* x, int M, int K, int S) {
  // LOCKSTEP_CUDA_BATCH_LINEAR=skinny|wgmma picks the kernel for 16 < M <= 64 (same bits).
  static const int env = [] {
    const char* e = std::getenv("LOCKSTEP_CUDA_BATCH_LINEAR");
    if (!e || !*e) return 0;
    if (std::string(e) == "skinny") return 1;
    if (std::string(e) == "wgmma") return 2;
    fail("LOCKSTEP_CUDA_BATCH_LINEAR: expected skinny or wgmma, got \"", e, "\"");
  }();
  if (tile_override != 0 && tile_override < 8) return false;
  const bool can = wgmma_available() && wgmma_fits(g, x, K);
  if (tile_override >= 8) {
    if (!can) fail("CUDA linear: the wgmma kernel was forced but cannot run here");
    return true;
  }
  if (!can || env == 1) return false;
  if (env == 2) return true;
  // The rule (H200, cuda_bench linear-batch on Qwen3-8B's decode linears): above 32 tokens the
  // wgmma kernel (64-token SPLIT tiles, or unsplit for a weight without pieces: the lm_head) beat
  // the skinny kernel's 64-token variant by 13-35% on every shape; at 17-32 tokens only where the
  // SPLIT grid is one wave (o_proj, down: 4-26%), while the 32-token skinny variant won on the
  // wide weights (q/k/v, gate/up, lm_head by 14-33%).
  if (M > 32) return true;
  return S > 1 && static_cast<int64_t>(g.blocks(128)) * S <= sm_count();
}

}  // namespace lin

namespace testing {
void set_linear_tile_override(int tile) { lin::tile_override = tile; }
}  // namespace testing

}  // namespace lockstep::kernels::cuda
