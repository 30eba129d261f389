// The warp-specialized quantized skinny kernel (M <= 16, x read as FP32): the same k walk, MMA
// operands, merge and stores as linear_skinny (linear_skinny.cuh) at QB = 4 / 8, so the result is
// bitwise the BF16 linear of the dequantized matrix, but with the work split by warp role so
// that the dequantization and the MMAs no longer alternate around one barrier per stage:
// - PW producer warps per piece stream the codes and scale/bias pairs through a private cp.async
//   ring of STAGES stages and dequantize them into a ring of T swizzled BF16 tiles (the QB = 0
//   tile layout). Each producer thread loads, waits for and dequantizes only its own 16-byte code
//   chunks (one pair each: a chunk of 16 or 32 k lies in one group of a power-of-two size >= 32),
//   so the producers never wait for each other.
// - WR MMA warps per piece (one per 16-row tile) stream x through their own ring of XS stages and
//   run stage j's MMAs from tile j % T, exactly as linear_skinny's mma_stage.
// - Tile t is handed over by two named barriers over the whole block (its pieces walk the same
//   number of stages): FULL(t) (producers bar.arrive after writing it, MMA warps bar.sync before
//   reading it) and EMPTY(t) (MMA warps bar.arrive after reading it, producers bar.sync before
//   rewriting it, T stages later). Every barrier generation completes: the MMA warps skip the
//   EMPTY arrivals of the last T stages, which no producer waits for.
#pragma once

#include "kernels/cuda/linear_skinny.cuh"

namespace lockstep::kernels::cuda::lin {

// Producers dequantize with dequant8_shifted where shift_bias allows it (per pair, so per 16 or
// 32 elements), else with dequant8; the same bits either way (the plain form alone measured 2-5%
// slower).
template <int WR_, int BK_, int STAGES_, int PW_, int T_, int XS_ = 3>
struct QwCfg {
  static constexpr int WR = WR_, BK = BK_, STAGES = STAGES_, PW = PW_, T = T_, XS = XS_;
};

template <int MT, int S, typename CF, int QB>
struct Qw {
  static constexpr int kWR = CF::WR, kBK = CF::BK, kStages = CF::STAGES, kPW = CF::PW, kT = CF::T,
                       kXS = CF::XS;
  static constexpr int kRows = 16 * kWR;
  static constexpr int kCT = 32 * kWR, kPT = 32 * kPW;  // MMA / producer threads per piece
  static constexpr int kThreads = S * (kCT + kPT);
  static constexpr int kCC = kBK * QB / 128;        // 16-byte code chunks per row and stage
  static constexpr int kChunks = kRows * kCC;       // per piece and stage
  static constexpr int kCPT = (kChunks + kPT - 1) / kPT;
  static constexpr int kCodeBytes = kChunks * 16;
  static constexpr int kSlot = kCodeBytes + kChunks * 4;  // codes, then one pair per chunk
  static constexpr int kWBytes = kRows * kBK * 2;          // one BF16 tile
  static constexpr int kXStride = kBK + 8;
  __host__ __device__ static constexpr int x_bytes(int xr) { return xr * kXStride * 4; }
  __host__ __device__ static constexpr int piece_bytes(int xr) {
    return (kT * kWBytes + kStages * kSlot + kXS * x_bytes(xr) + 127) / 128 * 128;
  }
  static constexpr int kReduceBytes = (S - 1) * kWR * MT * 4 * 32 * 4;
  __host__ __device__ static constexpr int smem(int xr) {
    return S * piece_bytes(xr) > kReduceBytes ? S * piece_bytes(xr) : kReduceBytes;
  }
  // Registers: at least 128 a thread; else as many blocks as the shared memory lets reside.
  static constexpr int kSmemBlocks = 232448 / (smem(8 * MT) + 1024);
  static constexpr int kRegBlocks = 65536 / (kThreads * 128);
  static constexpr int kMinBlocks =
      (kSmemBlocks < kRegBlocks ? kSmemBlocks : kRegBlocks) < 1
          ? 1
          : (kSmemBlocks < kRegBlocks ? kSmemBlocks : kRegBlocks);
  static_assert(QB == 4 || QB == 8, "quantized only");
  static_assert(kBK % 32 == 0 && (kBK * QB) % 128 == 0 && kStages >= 2 && kT >= 2 && kXS >= 2 &&
                    2 * kT <= 8 && kCodeBytes % 16 == 0 && kSlot % 16 == 0,
                "warp-specialized quantized config");
};

template <int MT, int S, typename CF, int QB>
__global__ void __launch_bounds__(Qw<MT, S, CF, QB>::kThreads, Qw<MT, S, CF, QB>::kMinBlocks)
    linear_skinny_ws(const __grid_constant__ Outs outs, const float* __restrict__ x, int M, int K,
                     int Ks, const uint32_t* __restrict__ sb, int lg, int pair_fmt) {
  using C = Qw<MT, S, CF, QB>;
  constexpr int BK = C::kBK, STAGES = C::kStages, ROWS = C::kRows, T = C::kT, XS = C::kXS;
  constexpr int WR = C::kWR, PW = C::kPW, CT = C::kCT, PT = C::kPT;
  extern __shared__ __align__(128) uint8_t smem[];
  const Out1 o = pick<true>(outs);
  const float* __restrict__ bias = o.bias;
  float* __restrict__ y = o.y;
  const int N = o.N;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int piece = warp / (WR + PW), pw = warp % (WR + PW);
  const bool mma_warp = pw < WR;
  const int n0 = o.bx * ROWS;
  const int m0 = blockIdx.y * 8 * MT;
  const int xr = min(8 * MT, M - m0);
  const int kbeg = piece * Ks, kend = min(K, kbeg + Ks);
  const int nk = (Ks + BK - 1) / BK;
  uint8_t* const pbase = smem + piece * C::piece_bytes(xr);
  uint8_t* const tiles = pbase;                          // T tiles
  uint8_t* const slots = pbase + T * C::kWBytes;         // STAGES code slots
  uint8_t* const xring = slots + STAGES * C::kSlot;      // XS x stages
  // Named barriers 1 + t (FULL) and 1 + T + t (EMPTY), over every thread of the block
  // (named_bar_sync / named_bar_arrive, common.cuh).
  auto bar_sync = [](int id) { named_bar_sync<C::kThreads>(id); };
  auto bar_arrive = [](int id) { named_bar_arrive<C::kThreads>(id); };

  pdl_launch_dependents();
  float acc[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  if (!mma_warp) {
    // --- producers ---
    const int ptid = (pw - WR) * 32 + lane;
    const uint8_t* codes = reinterpret_cast<const uint8_t*>(o.w);
    const int64_t row_bytes = static_cast<int64_t>(K) * QB / 8;
    const int gpr = K >> lg;
    const bool f16 = pair_fmt == kPairF16;
    auto load = [&](int slot, int chunk) {
      const uint32_t sa = smem_addr(slots + slot * C::kSlot);
      const int k0 = kbeg + chunk * BK;
#pragma unroll
      for (int u = 0; u < C::kCPT; ++u) {
        const int idx = ptid + PT * u;
        if (C::kChunks % PT == 0 || idx < C::kChunks) {
          const int r = idx / C::kCC, cc = idx % C::kCC;
          const int gk = k0 + cc * (128 / QB);
          const bool ok = (n0 + r < N) && (gk < kend);
          const uint8_t* src = ok ? codes + (n0 + r) * row_bytes + gk * QB / 8 : codes;
          cp_async16(sa + idx * 16, src, ok);
          const uint32_t* ps = ok ? sb + static_cast<int64_t>(n0 + r) * gpr + (gk >> lg) : sb;
          cp_async4(sa + C::kCodeBytes + idx * 4, ps, ok);
        }
      }
    };
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
      if (st < nk) load(st, st);
      cp_async_commit();
    }
    pdl_wait();
    int rs = 0, ls = STAGES - 1;
    for (int j = 0; j < nk; ++j) {
      cp_async_wait<STAGES - 2>();  // this thread's part of stage j
      {
        const int next = j + STAGES - 1;  // into the slot of stage j - 1 (its own part, done)
        if (next < nk) load(ls, next);
        cp_async_commit();
      }
      const int t = j % T;
      if (j >= T) bar_sync(1 + T + t);  // EMPTY(t): stage j - T's MMAs have read tile t
      const uint8_t* st = slots + rs * C::kSlot;
      uint8_t* tile = tiles + t * C::kWBytes;
#pragma unroll
      for (int u = 0; u < C::kCPT; ++u) {
        const int idx = ptid + PT * u;
        if (C::kChunks % PT == 0 || idx < C::kChunks) {
          const int r = idx / C::kCC, cc = idx % C::kCC;
          const uint32_t p = *reinterpret_cast<const uint32_t*>(st + C::kCodeBytes + idx * 4);
          const float s = half_bits_to_f32(p & 0xffffu, f16), b = half_bits_to_f32(p >> 16, f16);
          const uint4 v = *reinterpret_cast<const uint4*>(st + idx * 16);
          auto put = [&](auto&& dq, float bb) {
            if constexpr (QB == 8) {
              *reinterpret_cast<uint4*>(tile + swz(r, 2 * cc, BK * 2)) = dq(v.x, v.y, bb);
              *reinterpret_cast<uint4*>(tile + swz(r, 2 * cc + 1, BK * 2)) = dq(v.z, v.w, bb);
            } else {
              *reinterpret_cast<uint4*>(tile + swz(r, 4 * cc, BK * 2)) = dq(v.x, 0u, bb);
              *reinterpret_cast<uint4*>(tile + swz(r, 4 * cc + 1, BK * 2)) = dq(v.y, 0u, bb);
              *reinterpret_cast<uint4*>(tile + swz(r, 4 * cc + 2, BK * 2)) = dq(v.z, 0u, bb);
              *reinterpret_cast<uint4*>(tile + swz(r, 4 * cc + 3, BK * 2)) = dq(v.w, 0u, bb);
            }
          };
          auto slow = [&](uint32_t lo, uint32_t hi, float bb) {
            return dequant8<QB>(lo, hi, s, bb);
          };
          float c;
          if (shift_bias<QB>(s, b, p >> 16, c)) {
            put([&](uint32_t lo, uint32_t hi, float c2) {
              return dequant8_shifted<QB>(lo, hi, s, c2);
            }, c);
          } else {
            put(slow, b);
          }
        }
      }
      bar_arrive(1 + t);  // FULL(t): tile t holds stage j
      rs = rs + 1 == STAGES ? 0 : rs + 1;
      ls = ls + 1 == STAGES ? 0 : ls + 1;
    }
  } else {
    // --- MMA warps ---
    const int ctid = pw * 32 + lane;
    auto load_x = [&](int xs, int chunk) {
      stage_x_f32<BK, CT>(smem_addr(xring + xs * C::x_bytes(xr)), C::kXStride, x, m0, K,
                          kbeg + chunk * BK, kend, xr, ctid);
    };
    pdl_wait();
#pragma unroll
    for (int st = 0; st < XS - 1; ++st) {
      if (st < nk) load_x(st, st);
      cp_async_commit();
    }
    const int g = lane >> 2, t4 = lane & 3;
    const int arow = pw * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;  // A ldmatrix row
    const int acol = lane >> 4;                                     // A ldmatrix k half
    int xs = 0, xl = XS - 1;
    for (int j = 0; j < nk; ++j) {
      cp_async_wait<XS - 2>();  // this thread's part of stage j's x
      const int t = j % T;
      // FULL(t): tile t holds stage j; every MMA warp's x of stage j is visible, and every MMA
      // warp is done with stage j - 1 (so its x slot may be refilled).
      bar_sync(1 + t);
      {
        const int next = j + XS - 1;
        if (next < nk) load_x(xl, next);
        cp_async_commit();
      }
      const uint32_t ws = smem_addr(tiles + t * C::kWBytes);
      const float* xf = reinterpret_cast<const float*>(xring + xs * C::x_bytes(xr));
      const int steps = max(0, min(BK, kend - (kbeg + j * BK))) / 16;
      uint32_t a[BK / 16][4], b[BK / 16][MT][2];
#pragma unroll
      for (int s = 0; s < BK / 16; ++s) {
        ldmatrix_x4(a[s], ws + swz(arow, s * 2 + acol, BK * 2));
        x_f32_fragments<MT>(xf + s * 16, C::kXStride, xr, g, t4, b[s]);
      }
      if (j + T < nk) bar_arrive(1 + T + t);  // EMPTY(t): tile t read (ldmatrix is synchronous)
      // MMAs in increasing k (fragments past `steps` hold stale data and are not used).
#pragma unroll
      for (int s = 0; s < BK / 16; ++s)
        if (s < steps) {
#pragma unroll
          for (int jm = 0; jm < MT; ++jm) mma_bf16_16816(acc[jm], a[s], b[s][jm][0], b[s][jm][1]);
        }
      xs = xs + 1 == XS ? 0 : xs + 1;
      xl = xl + 1 == XS ? 0 : xl + 1;
    }
  }
  cp_async_wait<0>();
  skinny_merge_store<MT, S, WR>(smem, acc, piece, pw, mma_warp, n0, m0, N, M, bias, y);
}

// Launches one warp-specialized kernel; false (nothing launched) when its shared memory does not
// fit.
template <int MT, int S, typename CF, int QB>
bool launch_skinny_ws(const Group& g, const float* x, int M, int K, int Ks, const SkQuant& q) {
  using C = Qw<MT, S, CF, QB>;
  const int bytes = C::smem(std::min(8 * MT, M));
  if (bytes > smem_optin()) return false;
  constexpr auto kernel = linear_skinny_ws<MT, S, CF, QB>;
  allow_smem_max<kernel>();
  const dim3 grid(g.blocks(C::kRows), (M + 8 * MT - 1) / (8 * MT));
  launch("linear (quantized warp-specialized skinny kernel)", kernel, grid, C::kThreads, bytes,
         g.table(C::kRows), x, M, K, Ks, q.sb, q.lg, q.pair_fmt);
  return true;
}

}  // namespace lockstep::kernels::cuda::lin
