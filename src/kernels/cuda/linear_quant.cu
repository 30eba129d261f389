// linear() of a quantized (MLX affine 4/8-bit) weight, the M > 64 and fallback dequantization, and
// the quantized embedding gather. Every path produces the BF16 elements of linear_quant.cuh, so a
// quantized weight is, for every kernel and M, the BF16 matrix place() used to upload.
//
// - M <= 64 with BF16/F16 scales, groups of a power of two >= 32, and 16-byte aligned code rows
//   and piece starts: the skinny kernel
//   at QB = 4 / 8 (linear_skinny.cuh), which dequantizes each stage into the BF16 tile the BF16
//   kernel would have copied.
// - Otherwise (M > 64: prefill and large batches; F32 scales; other group sizes; 4-bit rows or
//   piece starts that are not 16-byte aligned): the weight is dequantized into a BF16 copy in a scratch buffer, and the
//   BF16 linear runs on it: bitwise by construction. The copy costs a pass writing 2 bytes per
//   weight (a 12288 x 4096 weight: ~150 MB, ~40 us on an H200, against ~0.8 ms of MMAs for 2048
//   tokens). The buffer is reserved when weights are placed (reserve_dequant_scratch), so no step,
//   recorded in a CUDA graph or not, has to grow it.
#include <cuda_bf16.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/linear_internal.cuh"
#include "kernels/cuda/linear_quant.cuh"
#include "kernels/cuda/linear_quant_skinny.cuh"
#include "kernels/cuda/linear_quant_testing.h"

namespace lockstep::kernels::cuda {
namespace lin {
namespace {

constexpr int kDequantSlot = 6;  // detail::scratch slot of the BF16 copy
int path_override = 0;           // testing::set_linear_quant_path
int path_last = 0;               // testing::linear_quant_path_used
int cfg_override = -1;           // testing::set_linear_quant_config (-1: LOCKSTEP_QUANT_CFG, once)
int cfg_last = 0;                // testing::linear_quant_config_used

int cfg_forced() {
  if (cfg_override < 0) {
    const char* e = std::getenv("LOCKSTEP_QUANT_CFG");  // benchmarking: force an M <= 16 config
    cfg_override = e ? std::atoi(e) : 0;
    if (cfg_override < 0 || cfg_override > kQuantCfgs) cfg_override = 0;
  }
  return cfg_override;
}

#define LOCKSTEP_QUANT_CFG_NAME(i, CF, name) name,
constexpr const char* kQuantCfgNames[] = {LOCKSTEP_QUANT_CFGS(LOCKSTEP_QUANT_CFG_NAME)};
static_assert(sizeof(kQuantCfgNames) / sizeof(kQuantCfgNames[0]) == kQuantCfgs);

// Chunk i of 8 elements (row i / (K / 8), k = 8 (i % (K / 8))) of the BF16 copy [N][K].
template <int QB>
__global__ void dequant_kernel(const uint32_t* __restrict__ codes, const void* __restrict__ pairs,
                               int K, int G, int fmt, uint16_t* __restrict__ out, int64_t chunks) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait (the copy is rewritten)
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= chunks) return;
  const int cpr = K / 8;
  const int64_t n = i / cpr;
  const int k = static_cast<int>(i - n * cpr) * 8;
  const float2 sb = load_pair(pairs, n * (K / G) + k / G, fmt);
  const uint32_t* row = codes + n * (static_cast<int64_t>(K) * QB / 32);
  const uint32_t lo = row[k * QB / 32];
  const uint32_t hi = QB == 8 ? row[k * QB / 32 + 1] : 0u;
  *reinterpret_cast<uint4*>(out + n * K + k) = dequant8<QB>(lo, hi, sb.x, sb.y);
}

// out[r][d] = the element (ids[r], d) of a quantized table, widened from BF16 to float32: what
// the gather of the BF16 table place() used to upload gives.
template <int QB>
__global__ void embedding_quant_kernel(const uint32_t* __restrict__ codes,
                                       const void* __restrict__ pairs,
                                       const int32_t* __restrict__ ids, int64_t n, int D, int G,
                                       int fmt, float* __restrict__ out) {
  pdl_launch_dependents();  // PDL (common.cuh): nothing before the wait
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * D) return;
  const int64_t r = i / D;
  const int d = static_cast<int>(i - r * D);
  const int64_t row = ids[r];
  constexpr int kPer = 32 / QB;  // codes per word
  const uint32_t word = codes[row * (D / kPer) + d / kPer];
  const uint32_t q = (word >> ((d % kPer) * QB)) & ((1u << QB) - 1u);
  const float2 sb = load_pair(pairs, row * (D / G) + d / G, fmt);
  out[i] = __uint_as_float(static_cast<uint32_t>(bf16_rne(dequant_f32(q, sb.x, sb.y))) << 16);
}

int pair_format(const Weight& w) {
  switch (w.scale_dtype) {
    case DType::BF16: return kPairBF16;
    case DType::F16: return kPairF16;
    case DType::F32: return kPairF32;
    default:
      fail("CUDA quantized weight: scale dtype ", dtype_name(w.scale_dtype),
           " is not supported (BF16, F16 or F32)");
  }
}

// Checks a quantized weight in the GPU layout (linear_quant.cuh); returns its pair format.
int check_quant(const Weight& w, const char* what) {
  if (w.quant != QuantFormat::Affine) fail(what, ": unknown quantized format");
  if (w.bits != 4 && w.bits != 8) fail(what, ": ", w.bits, "-bit codes are not supported (4 or 8)");
  const int64_t N = w.rows, K = w.cols, G = w.group_size;
  if (N <= 0 || K <= 0 || K % 16 != 0 || N > (int64_t{1} << 30) || K > (int64_t{1} << 30))
    fail(what, ": bad shape ", N, "x", K);
  if (G <= 0 || G % 16 != 0 || K % G != 0)
    fail(what, ": group size ", G, " must be a multiple of 16 that divides K = ", K);
  if (!w.data || !w.scales) fail(what, ": codes or scale/bias pairs missing");
  if (reinterpret_cast<uintptr_t>(w.data) % 16 != 0 || reinterpret_cast<uintptr_t>(w.scales) % 8 != 0)
    fail(what, ": codes must be 16-byte and pairs 8-byte aligned device pointers");
  return pair_format(w);
}

// The fused kernel's cp.async needs 16-byte aligned code rows and piece starts, and it takes the
// 4-byte pairs of 16-bit scales.
bool fused_shape(const Weight& w) {
  if (w.scale_dtype != DType::BF16 && w.scale_dtype != DType::F16) return false;
  // Groups of a power of two >= 32 (MLX writes 32, 64, 128): shifts instead of divisions, and at
  // most BK / 32 + 1 groups a stage.
  if (w.group_size < 32 || (w.group_size & (w.group_size - 1)) != 0) return false;
  if (w.bits == 8) return true;
  const int64_t K = w.cols;
  return K % 32 == 0 && split_len(K, pieces_of(w)) % 32 == 0;
}

// The weight's BF16 copy in the scratch buffer, as a Weight for the BF16 linear.
Weight dequantize_to_scratch(const Weight& w, int fmt) {
  const int64_t N = w.rows, K = w.cols;
  auto* copy = static_cast<uint16_t*>(scratch(kDequantSlot, static_cast<size_t>(N * K) * 2));
  const int64_t chunks = N * K / 8;
  const auto* codes = static_cast<const uint32_t*>(w.data);
  const int G = static_cast<int>(w.group_size);
  if (w.bits == 8)
    launch("dequant_kernel", dequant_kernel<8>, blocks_for(chunks, 256), 256, 0, codes, w.scales,
           static_cast<int>(K), G, fmt, copy, chunks);
  else
    launch("dequant_kernel", dequant_kernel<4>, blocks_for(chunks, 256), 256, 0, codes, w.scales,
           static_cast<int>(K), G, fmt, copy, chunks);
  // Linear kernels read their weights before their PDL wait (weights are never written by a
  // kernel, except this copy): the next launch goes plainly, after the copy is complete.
  note_stream_op();
  Weight b;
  b.dtype = DType::BF16;
  b.rows = N;
  b.cols = K;
  b.data = copy;
  b.k_pieces = w.k_pieces;
  return b;
}

}  // namespace

void linear_quant(const float* x, int64_t M, const Weight& w, const float* bias, float* y) {
  const int fmt = check_quant(w, "CUDA linear");
  if (M < 0 || M > (int64_t{1} << 30)) fail("CUDA linear: bad M = ", M);
  if (M == 0) return;
  const int N = static_cast<int>(w.rows), K = static_cast<int>(w.cols);
  const int S = pieces_of(w);
  if (M <= 64 && fused_shape(w) && path_override != 3) {
    if (reinterpret_cast<uintptr_t>(x) % 16 != 0)
      fail("CUDA linear: x must be a 16-byte aligned device pointer");
    Group g;
    g.S = S;
    g.add(static_cast<const uint16_t*>(w.data), bias, y, N);
    int lg = 5;
    while ((int64_t{1} << lg) < w.group_size) ++lg;
    const SkQuant q{static_cast<const uint32_t*>(w.scales), lg, fmt};
    const int m = static_cast<int>(M);
    const int cfg = cfg_forced();
    int cfg_used = 0;
    const int used = w.bits == 8 ? quant_skinny8(g, x, m, K, S, q, path_override, cfg, &cfg_used)
                                 : quant_skinny4(g, x, m, K, S, q, path_override, cfg, &cfg_used);
    if (used > 0) {
      path_last = used;
      cfg_last = cfg_used;
      return;
    }
  }
  path_last = 4;
  cfg_last = 0;
  const Weight b = dequantize_to_scratch(w, fmt);
  cuda::linear(x, M, b, bias, y);
}

}  // namespace lin

bool linear_quant_fused(const Weight& w) {
  return w.quant == QuantFormat::Affine && (w.bits == 4 || w.bits == 8) && lin::fused_shape(w);
}

void reserve_dequant_scratch(int64_t elements) {
  if (elements > 0) detail::scratch(lin::kDequantSlot, static_cast<size_t>(elements) * 2);
}

void embedding_quant(const Weight& table, const int32_t* ids, int64_t n, float* out) {
  using namespace lin;
  const int fmt = check_quant(table, "CUDA embedding");
  if (n <= 0) return;
  const int D = static_cast<int>(table.cols), G = static_cast<int>(table.group_size);
  const auto* codes = static_cast<const uint32_t*>(table.data);
  constexpr int kThreads = 256;
  if (table.bits == 8)
    launch("embedding_quant_kernel", embedding_quant_kernel<8>, blocks_for(n * D, kThreads),
           kThreads, 0, codes, table.scales, ids, n, D, G, fmt, out);
  else
    launch("embedding_quant_kernel", embedding_quant_kernel<4>, blocks_for(n * D, kThreads),
           kThreads, 0, codes, table.scales, ids, n, D, G, fmt, out);
}

namespace testing {
int set_linear_quant_path(int path) {
  lin::path_override = path;
  return 3;
}
int linear_quant_path_used() { return lin::path_last; }
int set_linear_quant_config(int config) {
  lin::cfg_override = config < 0 || config > lin::kQuantCfgs ? 0 : config;
  return lin::kQuantCfgs;
}
int linear_quant_config_used() { return lin::cfg_last; }
std::string linear_quant_config_name(int config) {
  if (config < 1 || config > lin::kQuantCfgs) return "rule";
  return lin::kQuantCfgNames[config - 1];
}
}  // namespace testing

}  // namespace lockstep::kernels::cuda
