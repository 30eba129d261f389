// linear_experts (cuda_ops.h) and the expert weight tables it reads: the BF16 launches here, the
// quantized ones in linear_experts_q4.cu / linear_experts_q8.cu (apart, so they compile in
// parallel). The kernel and why its bits are the per-expert linear()'s: linear_experts.cuh.
#include "kernels/cuda/linear_experts.cuh"

#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/cuda_ops.h"

namespace lockstep::kernels::cuda {

namespace lin {
namespace {
int expert_config_override = -1;  // testing::set_expert_decode_config (-1: the environment's)
}  // namespace

int expert_decode_config() {
  if (expert_config_override >= 0) return expert_config_override;
  static const int from_env = [] {
    const char* v = std::getenv("LOCKSTEP_CUDA_EXPERT_CFG");
    const int c = v ? std::atoi(v) : kExpertDecodeDefault;
    return c >= 0 && c < kExpertDecodeConfigs ? c : kExpertDecodeDefault;
  }();
  return from_env;
}

namespace {
int expert_batch_tile_override = 0;  // testing::set_expert_batch_tile_rows (0: the environment's)
}  // namespace

int expert_batch_tile_rows() {
  if (expert_batch_tile_override != 0) return expert_batch_tile_override;
  static const int from_env = [] {
    const char* v = std::getenv("LOCKSTEP_CUDA_EXPERT_BATCH_TILE");
    if (!v || !*v) return kExpertBatchTileDefault;
    const int rows = std::atoi(v);
    if (rows != 8 && rows != 16)
      fail("LOCKSTEP_CUDA_EXPERT_BATCH_TILE: expected 8 or 16 token rows, got '", v, "'");
    return rows;
  }();
  return from_env;
}

namespace {
// The quantized weight's pair format (linear_quant.cu's pair_format, for the fused formats).
int expert_pair_format(const Weight& w) { return w.scale_dtype == DType::F16 ? kPairF16 : kPairBF16; }

// The most rows per expert from which a BF16 call takes the tiled kernel (launch_tiled_experts)
// instead of the skinny one: the skinny kernel re-reads each weight for every 16 rows and runs
// its products one warp per 16 weight rows, which loses to whole tiles at prefill sizes (a
// 2048-token Qwen3-30B-A3B prefill ran at 0.57x of one tiled launch per expert). The bits are the
// same either way.
constexpr int64_t kTiledExpertRows = 64;

}  // namespace
}  // namespace lin

bool linear_experts_supported(const Weight& w) {
  if (w.quant != QuantFormat::None) return linear_quant_fused(w);
  return w.dtype == DType::BF16 && w.cols % 16 == 0 && w.rows > 0 &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

bool same_expert_format(const Weight& a, const Weight& b) {
  return a.rows == b.rows && a.cols == b.cols && a.quant == b.quant && a.bits == b.bits &&
         a.group_size == b.group_size && a.scale_dtype == b.scale_dtype &&
         (a.quant != QuantFormat::None || a.dtype == b.dtype);
}

ExpertTable make_expert_table(std::span<const Weight* const> w, int64_t P) {
  if (P < 1 || P > lin::kMaxExpertProj || w.empty() || static_cast<int64_t>(w.size()) % P != 0)
    fail("CUDA expert table: ", w.size(), " weights for ", P, " projections per expert");
  const Weight& w0 = *w[0];
  for (size_t i = 0; i < w.size(); ++i) {
    const Weight& x = *w[i];
    if (!linear_experts_supported(x))
      fail("CUDA expert table: weight ", i, " (", x.rows, "x", x.cols,
           ") is neither BF16 nor a quantized format the skinny kernel takes");
    if (!same_expert_format(x, w0))
      fail("CUDA expert table: weight ", i, " (", x.rows, "x", x.cols, ", ", x.bits,
           " bits) differs in shape or format from weight 0 (", w0.rows, "x", w0.cols, ", ",
           w0.bits, " bits)");
  }
  ExpertTable t;
  t.E = static_cast<int64_t>(w.size()) / P;
  t.P = P;
  t.shape = w0;
  t.shape.data = nullptr;
  t.shape.scales = nullptr;
  std::vector<const void*> ptrs(w.size()), pairs(w.size());
  for (size_t i = 0; i < w.size(); ++i) ptrs[i] = w[i]->data, pairs[i] = w[i]->scales;
  const size_t bytes = w.size() * sizeof(void*);
  t.w = static_cast<const void* const*>(malloc_device(bytes));
  upload(const_cast<const void**>(t.w), ptrs.data(), bytes);
  if (w0.quant != QuantFormat::None) {
    t.sb = static_cast<const void* const*>(malloc_device(bytes));
    upload(const_cast<const void**>(t.sb), pairs.data(), bytes);
  }
  synchronize();  // the host vectors go now
  return t;
}

namespace testing {
int set_expert_decode_config(int config) {
  lin::expert_config_override = config;
  return lin::kExpertDecodeConfigs;
}
int set_expert_batch_tile_rows(int rows) {
  lin::expert_batch_tile_override = rows == 8 || rows == 16 ? rows : 0;
  return lin::expert_batch_tile_rows();
}
}  // namespace testing

void free_expert_table(ExpertTable& t) {
  if (t.w) free_device(const_cast<const void**>(t.w));
  if (t.sb) free_device(const_cast<const void**>(t.sb));
  t.w = t.sb = nullptr;
}

void linear_experts(const ExpertTable& t, const float* x, const int32_t* x_rows, float* const* y,
                    const int32_t* groups, int64_t T, int64_t n) {
  using namespace lin;
  if (T <= 0 || n <= 0) return;
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0)
    fail("CUDA linear_experts: x must be a 16-byte aligned device pointer");
  const Weight& w = t.shape;
  const int N = static_cast<int>(w.rows), K = static_cast<int>(w.cols);
  const int S = split_count(N, K);
  ExpertArgs a{};
  a.w = t.w;
  a.sb = reinterpret_cast<const uint32_t* const*>(t.sb);
  a.x = x;
  a.x_rows = x_rows;
  for (int p = 0; p < t.P; ++p) a.y[p] = y[p];
  a.groups = groups;
  a.N = N, a.K = K, a.Ks = split_len(K, S), a.P = static_cast<int>(t.P);
  a.lg = 5;
  if (w.quant != QuantFormat::None) {
    while ((int64_t{1} << a.lg) < w.group_size) ++a.lg;
    a.pair_fmt = expert_pair_format(w);
  }
  const int slots = static_cast<int>(std::min<int64_t>(t.E, n));
  const int tt = static_cast<int>(T);
  if (w.quant == QuantFormat::None && T > kTiledExpertRows) {
    // The grouped rows in bf16, gathered through x_rows in the same pass: linear()'s rounding.
    launch_tiled_experts(a, x_to_bf16(x, n, K, x_rows), S, tt, slots);
    return;
  }
  bool ok;
  if (w.quant == QuantFormat::None) ok = launch_experts<0>(a, S, tt, slots);
  else if (w.bits == 8) ok = launch_experts_q8(a, S, tt, slots);
  else ok = launch_experts_q4(a, S, tt, slots);
  if (!ok) fail("CUDA linear_experts: the skinny kernel's shared memory does not fit this device");
}

}  // namespace lockstep::kernels::cuda
