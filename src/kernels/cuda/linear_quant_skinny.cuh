// The quantized skinny launches (M <= 64) of one code width: the kernels of linear_skinny.cuh at
// QB = 4 or 8 and the warp-specialized ones of linear_quant_ws.cuh, instantiated by linear_q4.cu
// and linear_q8.cu (apart, so the two widths compile in parallel). The k walk, operands and merge
// are every config's, so the choice is speed only (never bits).
// - M <= 16 (x read as FP32): one of the configs of LOCKSTEP_QUANT_CFGS (1-based; quant_cfg_rule
//   picks by shape, testing::set_linear_quant_config or LOCKSTEP_QUANT_CFG forces one), falling
//   back to the first two (the original 128-k and 64-k configs) where its shared memory does not
//   fit. The measured winners are mostly warp-specialized (linear_quant_ws.cuh) with 16 rows a
//   block: the kernel is latency-bound, and what paid most was more blocks per multiprocessor
//   (small shared memory per block), not fewer instructions (c5 vs c6: the shifted-bias dequant
//   gains 2-5%).
// - M in 17..64 (x converted to bf16 once): 32 rows of 64 k, 4 stages, one warp per row tile
//   (these carry 4 or 8 token columns of fragments: with dequant warps' 128-register cap they
//   spilled).
#pragma once

#include <type_traits>

#include "kernels/cuda/linear_quant_ws.cuh"
#include "kernels/cuda/linear_skinny.cuh"

namespace lockstep::kernels::cuda::lin {

using QkWide = SkCfg<2, 64, 4, 1>;  // bf16 x, M 17..64: 8 MT token columns of fragments spill at 128
// Where the device's shared memory does not hold those (SkCfg::SMALL: never in sm_90 code): 16
// rows, 3 stages. M <= 16: 78-86 KiB at S = 4, within 99 KiB (sm_86 / sm_89 / sm_120). bf16 x:
// 74-80 KiB for M 17..32 at S = 4, 123-126 KiB for M 33..64 (sm_80; on 99 KiB devices those
// take the dequantized copy, the same bits).
using QkSmall = SkCfg<1, 64, 3, 2, true>;
using QkWideSmall = SkCfg<1, 64, 3, 1, true>;

template <typename CF>
struct IsWs : std::false_type {};
template <int A, int B, int C, int D, int E, int F>
struct IsWs<QwCfg<A, B, C, D, E, F>> : std::true_type {};

template <int MT, bool XF32, typename CF, int QB>
bool quant_launch_s(const Group& g, const void* x, int M, int K, int S, const SkQuant& q) {
  const int Ks = split_len(K, S);
  if constexpr (IsWs<CF>::value) {
    static_assert(XF32, "warp-specialized configs read FP32 x");
    const float* xf = static_cast<const float*>(x);
    if (S == 4) return launch_skinny_ws<MT, 4, CF, QB>(g, xf, M, K, Ks, q);
    if (S == 2) return launch_skinny_ws<MT, 2, CF, QB>(g, xf, M, K, Ks, q);
    return launch_skinny_ws<MT, 1, CF, QB>(g, xf, M, K, Ks, q);
  } else {
    if (S == 4) return launch_skinny3<MT, XF32, 4, CF, QB>(g, x, M, K, Ks, q);
    if (S == 2) return launch_skinny3<MT, XF32, 2, CF, QB>(g, x, M, K, Ks, q);
    return launch_skinny3<MT, XF32, 1, CF, QB>(g, x, M, K, Ks, q);
  }
}

// The M <= 16 configs. SkCfg<WR, BK, STAGES, DQ>: linear_skinny (dequant and MMAs alternate
// around one barrier a stage); QwCfg<WR, BK, STAGES, PW, T>: linear_skinny_ws (PW producer warps
// a piece, T BF16 tiles between them and the MMA warps). 1 and 2 are the fallbacks (they fit every
// shape's shared memory); 3-8 are the ones quant_cfg_rule picks. Nine more were measured in the
// H200 sweep that set the rule and won nowhere (12 or 16 stages, 3 tiles, 64-row blocks, 64 k
// with the warp-specialized kernel, the plain dequant form): removed, so the build does not carry
// 100-odd kernels no shape runs (f5520af has them, to sweep again).
#define LOCKSTEP_QUANT_CFGS(X)                                \
  X(1, (SkCfg<2, 128, 6, 2>), "sk r32 k128 s6 dq2 (old big)") \
  X(2, (SkCfg<2, 64, 4, 2>), "sk r32 k64 s4 dq2 (old small)") \
  X(3, (QwCfg<1, 128, 8, 2, 2>), "ws r16 k128 s8 pw2 t2")     \
  X(4, (QwCfg<1, 128, 6, 1, 2>), "ws r16 k128 s6 pw1 t2")     \
  X(5, (QwCfg<2, 128, 6, 2, 2>), "ws r32 k128 s6 pw2 t2")     \
  X(6, (QwCfg<1, 256, 5, 2, 2>), "ws r16 k256 s5 pw2 t2")     \
  X(7, (QwCfg<1, 128, 8, 4, 2>), "ws r16 k128 s8 pw4 t2")     \
  X(8, (QwCfg<2, 128, 8, 4, 2>), "ws r32 k128 s8 pw4 t2")
constexpr int kQuantCfgs = 8;

template <typename CF, int QB>
bool quant_cfg_launch(const Group& g, const float* x, int M, int K, int S, const SkQuant& q) {
  return M <= 8 ? quant_launch_s<1, true, CF, QB>(g, x, M, K, S, q)
                : quant_launch_s<2, true, CF, QB>(g, x, M, K, S, q);
}

#define LOCKSTEP_QUANT_CFG_CASE(i, CF, name) \
  case i:                                    \
    return quant_cfg_launch<LOCKSTEP_UNPAREN CF, QB>(g, x, M, K, S, q);
#define LOCKSTEP_UNPAREN(...) __VA_ARGS__

// Launches config c (1..kQuantCfgs) for M <= 16; false when its shared memory does not fit.
template <int QB>
bool quant_cfg_run(int c, const Group& g, const float* x, int M, int K, int S, const SkQuant& q) {
  switch (c) {
    LOCKSTEP_QUANT_CFGS(LOCKSTEP_QUANT_CFG_CASE)
    default: return false;
  }
}

// The default config for M <= 16 by shape: the fastest one on an H200 (cuda_bench linear-quant;
// TESTS='*Quant*' BENCH=linear-quant ROUNDS=0 tools/cuda/decode_ab_on_device.sh re-sweeps it in
// one call; Qwen3-8B decode shapes, group 64, BF16 pairs, at M = 1, 4
// (standing for 2..8) and 16 (9..16)). What decided it, per Qwen3-8B shape, us at M = 1 (config
// 1 in brackets; the numbers are today's, the sweep's were c9 -> 6, c7 -> 4, c8 -> 5, c6 -> 3,
// c14 -> 7, c16 -> 8):
//   S = 1 (lm_head 151936x4096):  8-bit c6 311 (359), 4-bit c5 252 (350); M > 1: c5
//   S = 2 (gate/up 12288x4096):   8-bit c6 29.9 (37.2), 4-bit c4 24.6 (36.1); M > 8: c8
//   S = 4, N <= 1024 (k/v):       8-bit c6 5.0 (11.6), 4-bit c3 5.6 (11.5); M > 8: c7
//   S = 4, K >= 8192 (down):      8-bit c6 30.2 (34.1), 4-bit c4 24.6 (33.4); M > 8: c2 / c5
//   S = 4, other (q/o 4096x4096): 8-bit c4 11.3 (12.8; M 2..8: c5), 4-bit c4 9.1 (12.5);
//                                 M > 8: c2 / c5
// Speed only: every config gives the same bits.
inline int quant_cfg_rule(int QB, int M, int N, int K, int S) {
  const bool m8 = M <= 8;
  if (S == 1) return QB == 8 && M == 1 ? 6 : 5;
  if (S == 2) return m8 ? (QB == 8 ? 6 : 4) : 8;
  if (N <= 1024) return m8 ? (QB == 8 ? 6 : 3) : 7;
  if (K >= 8192) return m8 ? (QB == 8 ? 6 : 4) : (QB == 8 ? 2 : 5);
  if (QB == 8) return M == 1 ? 4 : (m8 ? 5 : 2);
  return m8 ? 4 : 5;
}

// One quantized weight (g holds it alone; its codes as g's weight pointer) against x, M <= 64.
// force: 0 = the rule, 1 = config 1 first, 2 = config 2 only (M <= 16); cfg > 0: config cfg first
// (M <= 16). Returns the path that ran (1 = an M <= 16 config other than 2, 2 = config 2, 3 = 64 k
// with bf16 x), or 0 when none fits the device's shared memory (nothing launched; the caller
// falls back); *cfg_used: the M <= 16 config that ran (0 for M > 16).
template <int QB>
int quant_skinny(const Group& g, const float* x, int M, int K, int S, const SkQuant& q, int force,
                 int cfg, int* cfg_used) {
  *cfg_used = 0;
  if (M <= 16) {
    int first = cfg > 0 ? cfg : quant_cfg_rule(QB, M, g.total_n, K, S);
    if (force == 1) first = 1;
    if (force != 2 && quant_cfg_run<QB>(first, g, x, M, K, S, q)) {
      *cfg_used = first;
      return first == 2 ? 2 : 1;
    }
    if (force != 2 && first != 1 && quant_cfg_run<QB>(1, g, x, M, K, S, q)) {
      *cfg_used = 1;
      return 1;
    }
    if (quant_cfg_run<QB>(2, g, x, M, K, S, q)) {
      *cfg_used = 2;
      return 2;
    }
    if (quant_cfg_launch<QkSmall, QB>(g, x, M, K, S, q)) return 1;
    return 0;
  }
  const uint16_t* xb = x_to_bf16(x, M, K);
  bool ok = M <= 32 ? quant_launch_s<4, false, QkWide, QB>(g, xb, M, K, S, q)
                    : quant_launch_s<8, false, QkWide, QB>(g, xb, M, K, S, q);
  if (!ok)
    ok = M <= 32 ? quant_launch_s<4, false, QkWideSmall, QB>(g, xb, M, K, S, q)
                 : quant_launch_s<8, false, QkWideSmall, QB>(g, xb, M, K, S, q);
  return ok ? 3 : 0;
}

int quant_skinny4(const Group& g, const float* x, int M, int K, int S, const SkQuant& q, int force,
                  int cfg, int* cfg_used);
int quant_skinny8(const Group& g, const float* x, int M, int K, int S, const SkQuant& q, int force,
                  int cfg, int* cfg_used);

}  // namespace lockstep::kernels::cuda::lin
