// Quantized weights through the CUDA backend: place() keeps them quantized, and the embedding
// gather and the linear (decode, verify and prefill sizes) of a placed weight give bitwise the
// results of the BF16 matrix that the host dequantization makes (f32_to_bf16(fma(q, s, b))), which
// is what place() uploaded before. A tied table (embedding and lm_head) is placed once.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "core/thread_pool.h"
#include "cuda_test_util.h"
#include "kernels/backend.h"
#include "kernels/quant_format.h"
#include "quant_test_util.h"

namespace lockstep::kernels::cuda::test {
namespace {

// The gather of a quantized table in the GPU layout: every element is the widened BF16 value of
// the host dequantization, and the same as the BF16 table's gather; rows in the padded last tile,
// repeats and every width / group size / scale dtype.
TEST_F(CudaTest, QuantEmbeddingMatchesDequantizedTable) {
  const int64_t V = 100, D = 384;
  const std::vector<int32_t> ids = {0, 99, 17, 17, 98, 96, 1, 50, 63, 64, 95};
  DeviceBuffer<int32_t> dids(ids);
  for (int bits : {4, 8})
    for (int64_t G : {32, 64, 128})
      for (DType sdt : {DType::BF16, DType::F16, DType::F32}) {
        const HostQuant hq = random_quant(V, D, bits, G, sdt, 40 + bits + static_cast<uint32_t>(G));
        const DeviceQuant dq = to_device(hq.w);
        const std::vector<uint16_t> bf = dequantized_bf16(hq.w);
        const DeviceBf16 db = bf16_on_device(bf, V, D);
        const auto n = static_cast<int64_t>(ids.size());
        DeviceBuffer<float> oq(n * D), ob(n * D);
        embedding_quant(dq.w, dids.get(), n, oq.get());
        embedding(db.w, dids.get(), n, ob.get());
        const auto a = oq.to_host(), b = ob.to_host();
        std::vector<float> host(n * D);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t d = 0; d < D; ++d) host[i * D + d] = bf16_to_f32(bf[ids[i] * D + d]);
        ASSERT_TRUE(same_bits(a.data(), host.data(), a.size())) << quant_name(hq.w);
        ASSERT_TRUE(same_bits(a.data(), b.data(), a.size())) << quant_name(hq.w);
      }
}

// A model-like quantized matrix (quantize_affine of float weights, as --quantize makes it) placed
// by the backend: a tied table is placed once, and its embedding and linear (M = 1, 7, 64, 65,
// 300: every kernel family) match the dequantized BF16 matrix placed the same way.
TEST_F(CudaTest, PlacedQuantWeightMatchesDequantizedBf16) {
  ThreadPool pool(2);
  const int64_t N = 1000, K = 512;
  const std::vector<uint16_t> src = random_bf16(N * K, 77, 0.05f);
  const Weight f = bf16_weight(src.data(), N, K);
  for (int bits : {4, 8}) {
    // A backend per width: its placed-weight cache is keyed by host address, which the second
    // width's freshly allocated arrays may reuse.
    unsetenv("LOCKSTEP_CUDA_QUANT");  // quantized placement is the default (cuda_backend.cpp)
    auto be = make_cuda_backend();
    const QuantizedMatrix q = quantize_affine(f, bits, 64, DType::BF16, pool);
    const Weight host = q.view();
    const Weight placed = be->place(host);
    EXPECT_EQ(placed.quant, QuantFormat::Affine);
    EXPECT_EQ(placed.bits, bits);
    const Weight again = be->place(host);  // a tied lm_head: the same device copy
    EXPECT_EQ(again.data, placed.data);
    EXPECT_EQ(again.scales, placed.scales);
    EXPECT_TRUE(linear_quant_fused(placed));
    const std::vector<uint16_t> bf = dequantized_bf16(host);
    Weight hb = f;
    hb.data = bf.data();
    const Weight ref = be->place(hb);

    const std::vector<int32_t> ids = {3, 999, 500, 3};
    Ints dids = be->upload(ids);
    Floats eq = be->array<float>(4 * K), eb = be->array<float>(4 * K);
    be->embedding(placed, dids.data(), 4, eq.data());
    be->embedding(ref, dids.data(), 4, eb.data());
    const auto a = be->download(eq.data(), 4 * K), b = be->download(eb.data(), 4 * K);
    ASSERT_TRUE(same_bits(a.data(), b.data(), a.size())) << bits << "-bit embedding";

    for (int64_t M : {1, 7, 16, 17, 64, 65, 300}) {
      Floats x = be->upload(random_floats(M * K, 90 + static_cast<uint32_t>(M), -2.0f, 2.0f));
      Floats yq = be->array<float>(M * N), yb = be->array<float>(M * N);
      be->linear(x.data(), M, placed, nullptr, yq.data());
      be->linear(x.data(), M, ref, nullptr, yb.data());
      const auto c = be->download(yq.data(), M * N), d = be->download(yb.data(), M * N);
      ASSERT_TRUE(same_bits(c.data(), d.data(), c.size()))
          << bits << "-bit linear M=" << M << ": " << diff_summary(c.data(), d.data(), c.size());
    }
  }
}


// With LOCKSTEP_CUDA_QUANT=0 quantized weights are placed as BF16; by default they stay
// quantized, except with F32 scales (which the fused kernel does not take): BF16 again.
TEST_F(CudaTest, QuantPlacementSwitchAndF32ScalesGiveBf16) {
  ThreadPool pool(2);
  const int64_t N = 64, K = 256;
  const std::vector<uint16_t> src = random_bf16(N * K, 78, 0.05f);
  const Weight f = bf16_weight(src.data(), N, K);
  const QuantizedMatrix q = quantize_affine(f, 8, 64, DType::BF16, pool);
  setenv("LOCKSTEP_CUDA_QUANT", "0", 1);
  auto be = make_cuda_backend();
  unsetenv("LOCKSTEP_CUDA_QUANT");
  const Weight placed = be->place(q.view());
  EXPECT_EQ(placed.quant, QuantFormat::None);
  EXPECT_EQ(placed.dtype, DType::BF16);
  auto be2 = make_cuda_backend();
  const QuantizedMatrix q32 = quantize_affine(f, 8, 64, DType::F32, pool);
  EXPECT_EQ(be2->place(q32.view()).quant, QuantFormat::None);
  EXPECT_EQ(be2->place(q.view()).quant, QuantFormat::Affine);
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
