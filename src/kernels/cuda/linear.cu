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
// - skinny (M <= 64, decode and speculative verify): blocks of S pieces x WR warps, 16 WR weight
//   rows, all the call's tokens (8 * MT, MT = 1, 2, 4, 8) per warp, each piece streamed through
//   its own cp.async ring (BK k per piece per stage, STAGES deep), fragments loaded ahead of the
//   MMAs; pieces 1.. hand their accumulators to piece 0 through shared memory. M <= 16 reads x as
//   FP32 (only the call's rows are staged) and rounds it in the fragment (one launch), with WR,
//   BK and STAGES picked per launch from N, K, M and S (pick_small: the winners of a sweep);
//   M > 16 first converts x to bf16 (one small kernel) so the x tile costs half, and uses 32 rows
//   of 64 k.
// - tiled (M > 64, prefill and mid-size batches): blocks of 128 weight rows x 256 tokens (8 warps
//   of 64 x 64), 128 x 128 (8 warps of 64 x 32) or 64 x 64 (4 warps of 32 x 32, 3 blocks per SM),
//   the largest that still gives about one block per SM; 64 k per stage, 4 stages, ldmatrix from
//   XOR-swizzled shared memory. The k chunks follow the pieces, and at each piece's end its
//   accumulator is flushed into y in piece order (first piece stores, later pieces add, the last
//   adds the bias), so y ends with the same ((a0 + a1) + a2) + a3 (+ bias) and only one register
//   set of accumulators is live.
// - quantized weights (4/8-bit affine, linear_quant.cu): the skinny kernel at QB = 4 / 8 streams
//   the codes and scale/bias pairs instead of BF16 rows and dequantizes each stage into the very
//   BF16 tile it would have copied (linear_skinny.cuh); M > 64 and shapes it cannot take
//   dequantize into a BF16 copy for the kernels above. Either way the MMAs see the BF16 matrix
//   place() used to upload, so the bits are those of the BF16 linear of the dequantized weight.
// - linear_multi: weights that share x and S run in one launch (up to kMaxOuts): the blocks along
//   grid x are cut into each weight's row blocks in turn, and a block runs the one-weight code on
//   its weight (Outs / pick). Only addresses differ; every y keeps its separate linear()'s bits.
#include "kernels/cuda/linear_internal.cuh"
#include "kernels/cuda/linear_skinny.cuh"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;
using namespace lin;


// --- x to bf16 ------------------------------------------------------------------------------------
// Pair i of row r (half = K / 2 pairs a row) from x's row rows[r], or row r without a row map.
__global__ void to_bf16_kernel(const float* __restrict__ x, const int32_t* __restrict__ rows,
                               uint32_t* __restrict__ out, int64_t n2, int64_t half) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n2) {
    const int64_t src = rows ? rows[i / half] * half + i % half : i;
    const float2 v = reinterpret_cast<const float2*>(x)[src];
    out[i] = pack_bf16x2(v.x, v.y);
  }
}



template <int MT, bool XF32, typename CF>
bool launch_skinny_s(const Group& g, const void* x, int M, int K, int S) {
  const int Ks = split_len(K, S);
  if (S == 4) return launch_skinny3<MT, XF32, 4, CF>(g, x, M, K, Ks);
  if (S == 2) return launch_skinny3<MT, XF32, 2, CF>(g, x, M, K, Ks);
  return launch_skinny3<MT, XF32, 1, CF>(g, x, M, K, Ks);
}

// M in 17..64 (x converted to bf16 first): 32 rows, 64 k, 4 stages where about 104 KiB hold
// them (two blocks per SM), else 3 within 220 KiB, else 2.
constexpr int bf16_stages(int MT, int S) {
  const int stage = S * (32 * 64 * 2 + 8 * MT * 64 * 2);
  const int fit = (104 * 1024) / stage;
  return fit >= 4 ? 4 : (fit == 3 || 3 * stage <= 220 * 1024 ? 3 : 2);
}
template <int MT>
void launch_skinny_bf16(const Group& g, const uint16_t* x, int M, int K, int S) {
  const int Ks = split_len(K, S);
  bool ok;
  if (S == 4) ok = launch_skinny3<MT, false, 4, SkCfg<2, 64, bf16_stages(MT, 4)>>(g, x, M, K, Ks);
  else if (S == 2) ok = launch_skinny3<MT, false, 2, SkCfg<2, 64, bf16_stages(MT, 2)>>(g, x, M, K, Ks);
  else ok = launch_skinny3<MT, false, 1, SkCfg<2, 64, bf16_stages(MT, 1)>>(g, x, M, K, Ks);
  // Within 99 KiB (sm_86 / sm_89 / sm_120) 64 rows at S = 4 take 2 stages (96 KiB); every other
  // (MT, S) of the rule above already fits.
  if constexpr (MT == 8)
    if (!ok && S == 4) ok = launch_skinny3<MT, false, 4, SkCfg<2, 64, 2, 1, true>>(g, x, M, K, Ks);
  if (!ok) fail("CUDA linear: the skinny kernel's shared memory does not fit this device");
}

// --- M <= 16: decode and speculative verify (x read as FP32, rounded in the fragment) ------------
// The configurations a launch picks from: rows per block (16 wr), k per stage, stages. Every one
// walks K alike; tests force each one (testing::set_linear_skinny_override) and check the bits.
// These are the winners of a sweep over 20 (tools/cuda/kernel_bench.cu linear-sweep, H200,
// 2026-11-29): deeper rings (6-8 stages of 16 rows, 8 of 32), 16-row blocks of 64 k, and bulk
// L2 prefetches of the rows' next chunks ahead of the ring all lost (the prefetches up to half the
// bandwidth, never a gain beyond noise).
struct SkDesc {
  int wr, bk, stages;
  bool small = false;  // for less shared memory than Hopper's (SkCfg::SMALL)
};
constexpr SkDesc kSkConfigs[] = {
    {2, 64, 4},   // 0 r32/k64/s4: the fallback (fits every S and M <= 16); M > 8 on 2-4k rows
    {1, 128, 4},  // 1 r16/k128/s4: M = 1 on 4-6k rows of K >= 4096 (3 blocks per SM, one wave);
                  //   <= 2k rows at M > 8
    {1, 256, 3},  // 2 r16/k256/s3: <= 2k rows where 4 stages do not fit (M 7, 8 at S = 4)
    {1, 256, 4},  // 3 r16/k256/s4: <= 2k rows, M <= 6 (few blocks: the most bytes per block)
    {2, 128, 4},  // 4 r32/k128/s4: 2-4k rows and S = 2 (gate/up), M <= 8
    {2, 128, 6},  // 5 r32/k128/s6: (lm_head at M 1-4 within 1% of 7; kept for sweeps)
    {4, 64, 4},   // 6 r64/k64/s4: > 4k rows at S = 4
    {4, 128, 3},  // 7 r64/k128/s3: S = 1 (lm_head), and S = 2 at M > 8
    {1, 64, 3, true},  // 8 r16/k64/s3: the fallback within 99 KiB (sm_86 / sm_89 / sm_120)
};
constexpr int kSkSmallFallback = 8;
constexpr int kSkN = static_cast<int>(sizeof(kSkConfigs) / sizeof(kSkConfigs[0]));
template <int I>
using SkOf = SkCfg<kSkConfigs[I].wr, kSkConfigs[I].bk, kSkConfigs[I].stages, 1, kSkConfigs[I].small>;

// Shared memory of config d at S pieces for M <= 16 tokens (Skinny<>::smem, checked below).
constexpr int small_smem(const SkDesc& d, int S, int M) {
  const int mt = M <= 8 ? 1 : 2;
  const int pipe = d.stages * S * (16 * d.wr * d.bk * 2 + M * (d.bk + 8) * 4);
  const int reduce = (S - 1) * d.wr * mt * 4 * 32 * 4;
  return pipe > reduce ? pipe : reduce;
}
static_assert(small_smem(kSkConfigs[3], 4, 6) == Skinny<1, true, 4, SkOf<3>>::smem(6) &&
                  small_smem(kSkConfigs[7], 2, 16) == Skinny<2, true, 2, SkOf<7>>::smem(16) &&
                  small_smem(kSkConfigs[0], 4, 16) == Skinny<2, true, 4, SkOf<0>>::smem(16),
              "small_smem mirrors Skinny<>::smem");

template <int MT, int I = 0>
bool launch_small_cfg(int c, const Group& g, const float* x, int M, int K, int S) {
  if constexpr (I < kSkN) {
    if (c == I) return launch_skinny_s<MT, true, SkOf<I>>(g, x, M, K, S);
    return launch_small_cfg<MT, I + 1>(c, g, x, M, K, S);
  } else {
    return false;
  }
}

int skinny_override = 0;  // testing::set_linear_skinny_override (0: the rule below)
int skinny_last = 0;      // testing::linear_skinny_config_used


// The rule, from the launch's weight rows N (all its weights together), K, M and S alone, fit to
// the sweep's times at M = 1, 4, 16 (each pick within 3% of that shape's best config):
// - S = 1 with >= 16k rows (lm_head): 64 rows of 128 k, 3 stages (4.2-4.3 TB/s).
// - S = 2 with >= 8k rows (gate/up): 32 rows of 128 k for M <= 8, else 64 rows.
// - <= 2k rows (k/v alone, 0.6B o_proj/down): too few blocks to fill the GPU, so the most bytes per
//   block: 16 rows of 256 k, 4 stages while they fit (M <= 6 at S = 4), then 3; 128 k for M > 8.
// - 2-4k rows (8B o_proj/down, 0.6B q/k/v): 32 rows of 128 k (M <= 8) or of 64 k.
// - more rows (8B q/k/v, 0.6B gate/up): 64 rows of 64 k, except 16-row blocks of 128 k at M = 1
//   with K >= 4096 while all fit at once (3 per SM).
int pick_small(int64_t N, int64_t K, int64_t M, int S) {
  const int m = static_cast<int>(M);
  if (S == 1 && N >= 16384) return 7;
  if (S == 2 && N >= 8192) return M > 8 ? 7 : 4;
  if (N <= 2048) {
    if (M > 8) return 1;
    for (int c : {3, 2, 1})
      if (small_smem(kSkConfigs[c], S, m) <= smem_optin()) return c;
    return 0;
  }
  if (N <= 4096) return M > 8 ? 0 : 4;
  if (M == 1 && K >= 4096 && (N + 15) / 16 <= 3 * sm_count()) return 1;
  return 6;
}

// LOCKSTEP_CUDA_SKINNY_REMAP="a:b,c:d": wherever the rule picks config a (kSkConfigs' index) take
// b instead. For measuring the configs inside a whole decode step (the rule's sweep timed each
// linear alone, where the biggest ring wins; in a step under PDL a smaller ring lets the next
// kernel's blocks be resident sooner). Every config walks K alike: the bits never move.
const std::vector<int>& skinny_remap() {
  static const std::vector<int> map = [] {
    std::vector<int> m(kSkN);
    for (int i = 0; i < kSkN; ++i) m[i] = i;
    const char* v = std::getenv("LOCKSTEP_CUDA_SKINNY_REMAP");
    for (const char* p = v; p && *p;) {
      char* colon = nullptr;
      char* end = nullptr;
      const long a = std::strtol(p, &colon, 10);
      const long b = *colon == ':' ? std::strtol(colon + 1, &end, 10) : -1;
      if (colon == p || !end || end == colon + 1 || (*end && *end != ',') || a < 0 || a >= kSkN ||
          b < 0 || b >= kSkN)
        fail("LOCKSTEP_CUDA_SKINNY_REMAP: expected a:b pairs of configs 0..", kSkN - 1,
             " separated by commas, got '", v, "'");
      m[a] = static_cast<int>(b);
      p = *end ? end + 1 : end;
    }
    return m;
  }();
  return map;
}

void launch_small(const Group& g, const float* x, int M, int K, int S) {
  int c = skinny_override > 0 && skinny_override <= kSkN
              ? skinny_override - 1
              : skinny_remap()[pick_small(g.total_n, K, M, S)];
  auto go = [&](int cfg) {
    return M <= 8 ? launch_small_cfg<1>(cfg, g, x, M, K, S) : launch_small_cfg<2>(cfg, g, x, M, K, S);
  };
  if (!go(c)) {
    c = 0;
    if (!go(c)) {
      c = kSkSmallFallback;
      if (!go(c)) fail("CUDA linear: the skinny kernel's shared memory does not fit this device");
    }
  }
  skinny_last = c + 1;
}

// A shard's piece count: the kernels are built for 1, 2 and 4 (0: from the shape).
void check_k_pieces(const Weight& w) {
  if (w.k_pieces != 0 && w.k_pieces != 1 && w.k_pieces != 2 && w.k_pieces != 4)
    fail("CUDA linear: k_pieces = ", w.k_pieces, " (the kernels walk K in 1, 2 or 4 pieces)");
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

// The groups of one call: each weight joins the first group of its S (pieces_of) with room, else
// opens one (call order within a group; launch order between groups is free).
std::vector<Group> groups_of(const LinearOut* outs, int64_t n) {
  std::vector<Group> gs;
  for (int64_t i = 0; i < n; ++i) {
    const Weight& w = *outs[i].w;
    const int S = pieces_of(w);
    size_t at = 0;
    while (at < gs.size() && !(gs[at].S == S && gs[at].o.n < kMaxOuts)) ++at;
    if (at == gs.size()) {
      gs.emplace_back();
      gs.back().S = S;
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
  auto S_of = [](const Group& g) { return g.S; };
  if (M <= 16) {
    for (const Group& g : gs) launch_small(g, x, m, k, S_of(g));
    return;
  }
  const uint16_t* xb = x_to_bf16(x, M, K);
  for (const Group& g : gs) {
    if (M <= 64 && wgmma_for_batch(g, xb, m, k, S_of(g))) launch_tiled(g, xb, m, k, S_of(g));
    else if (M <= 32) launch_skinny_bf16<4>(g, xb, m, k, S_of(g));
    else if (M <= 64) launch_skinny_bf16<8>(g, xb, m, k, S_of(g));
    else launch_tiled(g, xb, m, k, S_of(g));
  }
}

}  // namespace

const uint16_t* lin::x_to_bf16(const float* x, int64_t M, int64_t K, const int32_t* rows) {
  auto* xb = static_cast<uint16_t*>(scratch(0, static_cast<size_t>(M * K) * 2));
  const int64_t n2 = M * K / 2;
  launch("to_bf16_kernel", to_bf16_kernel, blocks_for(n2, 256), 256, 0, x, rows,
         reinterpret_cast<uint32_t*>(xb), n2, K / 2);
  return xb;
}

void linear(const float* x, int64_t M, const Weight& w, const float* bias, float* y) {
  check_k_pieces(w);
  if (w.quant != QuantFormat::None) return lin::linear_quant(x, M, w, bias, y);
  check_weight(w, M);
  if (M == 0) return;
  const LinearOut one{&w, bias, y};
  run_groups(x, M, w.cols, groups_of(&one, 1));
}

void linear_piece(const float* x, int64_t M, const Weight& w, float* y) {
  Weight one = w;
  one.k_pieces = 1;
  linear(x, M, one, nullptr, y);
}

// Quantized weights run one by one (linear_quant), each bitwise its own linear(); the BF16 ones
// share launches as before.
void linear_multi(const float* x, int64_t M, const LinearOut* outs, int64_t n) {
  if (n <= 0) return;
  const int64_t K = outs[0].w->cols;
  std::vector<LinearOut> dense;
  for (int64_t i = 0; i < n; ++i) {
    if (outs[i].w->cols != K)
      fail("CUDA linear_multi: weight ", i, " has K = ", outs[i].w->cols, ", the first has ", K);
    check_k_pieces(*outs[i].w);
    if (outs[i].w->quant != QuantFormat::None) continue;
    check_weight(*outs[i].w, M);
    dense.push_back(outs[i]);
  }
  if (M == 0) return;
  for (int64_t i = 0; i < n; ++i)
    if (outs[i].w->quant != QuantFormat::None) lin::linear_quant(x, M, *outs[i].w, outs[i].bias, outs[i].y);
  if (!dense.empty()) run_groups(x, M, K, groups_of(dense.data(), static_cast<int64_t>(dense.size())));
}

namespace testing {
int set_linear_skinny_override(int config) {
  skinny_override = config;
  return kSkN;
}
int linear_skinny_config_used() { return skinny_last; }
bool linear_skinny_config_runs(int config, int64_t N, int64_t K, int64_t M) {
  if (config < 1 || config > kSkN || M < 1 || M > 16) return false;
  const SkDesc& d = kSkConfigs[config - 1];
  if (d.small && device_caps().code_arch == 90) return false;  // left out of sm_90 code
  return small_smem(d, split_count(N, K), static_cast<int>(M)) <= smem_optin();
}
std::string linear_skinny_config_name(int config) {
  if (config < 1 || config > kSkN) return "rule";
  const SkDesc& d = kSkConfigs[config - 1];
  return "r" + std::to_string(16 * d.wr) + "/k" + std::to_string(d.bk) + "/s" +
         std::to_string(d.stages);
}
}  // namespace testing

}  // namespace lockstep::kernels::cuda
