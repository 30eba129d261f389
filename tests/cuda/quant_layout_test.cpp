// The host side of the quantized GPU layout (kernels/quant_gpu_layout.h): the pairs place()
// uploads carry each group's scale and bias bit for bit, in the order the kernels index them
// (row-major [row][group], scale in the low half), so fma(q, s, b) rebuilt from the codes and a
// pair is quant_element exactly. Host only: no GPU needed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/quant_format.h"
#include "kernels/quant_gpu_layout.h"
#include "quant_test_util.h"

namespace lockstep::kernels::cuda::test {
namespace {

// A pair entry decoded as the kernels do (linear_quant.cuh load_pair).
void decode_pair(const Weight& w, const uint8_t* pairs, int64_t i, float* s, float* b) {
  if (w.scale_dtype == DType::F32) {
    std::memcpy(s, pairs + i * 8, 4);
    std::memcpy(b, pairs + i * 8 + 4, 4);
    return;
  }
  uint32_t p;
  std::memcpy(&p, pairs + i * 4, 4);
  const auto lo = static_cast<uint16_t>(p & 0xffffu), hi = static_cast<uint16_t>(p >> 16);
  const bool f16 = w.scale_dtype == DType::F16;
  *s = f16 ? f16_to_f32(lo) : bf16_to_f32(lo);
  *b = f16 ? f16_to_f32(hi) : bf16_to_f32(hi);
}

TEST(QuantGpuLayout, PairsCarryEveryScaleAndBiasInKernelOrder) {
  for (int bits : {4, 8})
    for (int64_t G : {32, 64, 128})
      for (DType sdt : {DType::BF16, DType::F16, DType::F32}) {
        const int64_t N = 37, K = 384;
        const HostQuant hq = random_quant(N, K, bits, G, sdt, 5 + bits + static_cast<uint32_t>(G));
        const Weight& w = hq.w;
        ASSERT_EQ(gpu_code_bytes(w), N * K * bits / 8);
        ASSERT_EQ(gpu_pair_bytes(w), N * (K / G) * (sdt == DType::F32 ? 8 : 4));
        std::vector<uint8_t> pairs(static_cast<size_t>(gpu_pair_bytes(w)));
        // In two row blocks, as place() packs them.
        const int64_t row_pair = gpu_pair_bytes(w) / N;
        pack_gpu_pairs(w, 0, 20, pairs.data());
        pack_gpu_pairs(w, 20, N, pairs.data() + 20 * row_pair);
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < K; ++k) {
            const int64_t g = n * (K / G) + k / G;
            float s, b;
            decode_pair(w, pairs.data(), g, &s, &b);
            ASSERT_EQ(s, scalar_at(sdt, w.scales, g)) << n << " " << k;
            ASSERT_EQ(b, scalar_at(sdt, w.biases, g)) << n << " " << k;
            const float e = std::fma(static_cast<float>(quant_code(w, n, k)), s, b);
            const float want = quant_element(w, n, k);
            ASSERT_EQ(std::memcmp(&e, &want, 4), 0) << n << " " << k;
          }
      }
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
