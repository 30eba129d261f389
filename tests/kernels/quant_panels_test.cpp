// The CPU's panel layout of 4/8-bit weights (kernels/cpu/quant_panels.h): which weights get it,
// that packing only moves the checkpoint's bits, that the int8 quant dot on panels gives the
// scalar oracle's bits on every compiled target at every row count, thread count and one-row
// prefetch choice, mixed with weights without panels, and that CpuBackend::place() builds panels
// only where they serve.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL  // iterate the VNNI target too (cpu/linear_quant_int8.cpp compiles it)
#endif
#include <gtest/gtest.h>

#include <cstring>

#include "hwy/targets.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_tuning.h"
#include "kernels/cpu/quant_panels.h"
#include "kernels/numerics.h"
#include "kernels/ops.h"
#include "kernels/quant_format.h"
#include "kernels/ref/quant_int8_ref.h"
#include "quant_test_util.h"
#include "test_util.h"

namespace lockstep::kernels {
namespace {

using namespace test_quant;

// Groups of 4, 8 and 16 code words; row counts off the panel height; one partial chunk, full
// chunks, a full and a partial one.
const Case kCases[] = {{4, 64, 37, 1024}, {4, 32, 21, 512}, {4, 128, 9, 2304}, {4, 64, 6, 1408},
                       {4, 64, 11, 768},  {8, 64, 23, 1024}, {8, 32, 13, 640}, {8, 16, 10, 320},
                       {4, 128, 5, 384}};

// A weight with its panels (owned here).
struct Paneled {
  std::vector<uint8_t> bytes;
  Weight w;
  explicit Paneled(const Weight& src) : w(src) {
    EXPECT_TRUE(panels_cover(src));
    const PanelShape s = panel_shape(src);
    bytes.assign(static_cast<size_t>(s.bytes()), 0xAB);  // packing must write every byte
    pack_panels(src, 0, s.panels, bytes.data());
    w.panels = bytes.data();
  }
};

TEST(QuantPanels, CoverTheGroupInterleavedShapes) {
  for (const Case& c : kCases) EXPECT_TRUE(panels_cover(quantized(c, DType::BF16, 1).view()));
  // 4-bit groups of 16 (2 words) and 256 (32 words), 8-bit of 128; rows the 4-bit activation
  // order does not cover (K % 128 != 0); float weights.
  for (const Case& c : {Case{4, 16, 4, 256}, Case{4, 256, 4, 512}, Case{8, 128, 4, 256},
                        Case{4, 32, 4, 96}, Case{8, 32, 4, 160}})
    EXPECT_FALSE(panels_cover(quantized(c, DType::BF16, 1).view()))
        << c.bits << "-bit g" << c.group << " K=" << c.K;
  Weight f;
  f.dtype = DType::BF16;
  f.rows = 8;
  f.cols = 256;
  EXPECT_FALSE(panels_cover(f));
}

// Every code word, scale and bias of the checkpoint sits where quant_panels.h says (narrow last
// chunks included), and every other byte, the tail too, is zero.
TEST(QuantPanels, PackingOnlyMovesTheCheckpointsBits) {
  for (const Case& c : kCases)
    for (DType sd : {DType::BF16, DType::F32}) {
      const QuantizedMatrix q = quantized(c, sd, 3);
      const Weight w = q.view();
      const Paneled p(w);
      const PanelShape s = panel_shape(w);
      const int64_t groups = c.K / c.group, vb = s.value_bytes;
      std::vector<uint8_t> want(p.bytes.size(), 0);
      for (int64_t r = 0; r < c.N; ++r)
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t ch = g / 16, width = s.width(ch), j = r % kPanelRows, v = g % 16;
          uint8_t* chunk = want.data() + r / kPanelRows * s.panel_bytes() + s.chunk_offset(ch);
          for (int64_t k = 0; k < s.words; ++k)
            std::memcpy(chunk + ((k * kPanelRows + j) * width + v) * 4,
                        q.words.data() + r * (c.K * c.bits / 32) + g * s.words + k, 4);
          const int64_t at = (r * groups + g) * vb;
          uint8_t* values = chunk + s.code_bytes(width) + (j * width + v) * vb;
          std::memcpy(values, q.scales.data() + at, vb);
          std::memcpy(values + s.values_bytes(width), q.biases.data() + at, vb);
        }
      EXPECT_EQ(0, std::memcmp(want.data(), p.bytes.data(), want.size()))
          << c.bits << "-bit g" << c.group << " K=" << c.K << " N=" << c.N;
    }
}

TEST(QuantPanels, EveryCompiledTargetGivesTheOraclesBits) {
  QuantDotScope mode(QuantDot::Int8);
  for (const Case& c : kCases)
    for (DType sd : {DType::BF16, DType::F16, DType::F32}) {
      const QuantizedMatrix q = quantized(c, sd, 5);
      const Paneled p(q.view());
      const int64_t M = 9;
      const auto x = activations(M * c.K, 9);
      const auto bias = test::random_floats(c.N, 4);
      int tested = 0;
      for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        for (int64_t rows = 1; rows <= M; ++rows) {
          const auto want = oracle(x.data(), rows, q.view(), bias.data());
          for (int threads : {1, 3}) {
            const auto y = run(x.data(), rows, p.w, bias.data(), threads);
            ASSERT_TRUE(test::same_bits(y.data(), want.data(), want.size()))
                << c.bits << "-bit g" << c.group << " K=" << c.K << " N=" << c.N << " scales "
                << dtype_name(sd) << " rows " << rows << " threads " << threads << " target "
                << hwy::TargetName(target);
          }
        }
        ++tested;
      }
      hwy::SetSupportedTargetsForTest(0);
      EXPECT_GE(tested, test::kMinTargets);
    }
}

// One-row calls ask for the panel stream a distance ahead (cpu_tuning.h:
// panel_prefetch_bytes(), with the GEMV's locality); none, a usual and a long distance, in every
// locality form: the oracle's bits.
TEST(QuantPanels, OneRowPrefetchChoicesGiveTheOraclesBits) {
  QuantDotScope mode(QuantDot::Int8);
  const int64_t bytes0 = gemv_prefetch_bytes(), panel0 = panel_prefetch_bytes();
  const int locality0 = gemv_prefetch_locality();
  for (const Case& c : kCases) {
    const QuantizedMatrix q = quantized(c, DType::BF16, 13);
    const Paneled p(q.view());
    const auto x = activations(c.K, 15);
    const auto want = oracle(x.data(), 1, q.view(), nullptr);
    for (int locality : {0, 1})
      for (int64_t bytes : {int64_t{0}, int64_t{6144}, int64_t{65536}}) {
        set_gemv_prefetch(bytes, locality);
        set_panel_prefetch_bytes(bytes);
        for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
          hwy::SetSupportedTargetsForTest(target);
          const auto y = run(x.data(), 1, p.w, nullptr, 2);
          EXPECT_TRUE(test::same_bits(y.data(), want.data(), want.size()))
              << c.bits << "-bit g" << c.group << " K=" << c.K << " bytes " << bytes
              << " target " << hwy::TargetName(target);
        }
        hwy::SetSupportedTargetsForTest(0);
      }
  }
  set_gemv_prefetch(bytes0, locality0);
  set_panel_prefetch_bytes(panel0);
}

// One call over weights with and without panels, 4- and 8-bit (the activations are ordered for
// one code width: the other width's panels weight takes the lane trees on its checkpoint bytes).
TEST(QuantPanels, MixedCallsEqualTheOracle) {
  QuantDotScope mode(QuantDot::Int8);
  const QuantizedMatrix a = quantized({4, 64, 40, 1024}, DType::BF16, 1);
  const QuantizedMatrix b = quantized({8, 64, 24, 1024}, DType::BF16, 2);
  const QuantizedMatrix c = quantized({4, 64, 33, 1024}, DType::BF16, 3);
  const Paneled pa(a.view()), pb(b.view());
  const Weight wc = c.view();  // no panels
  ThreadPool pool(3);
  for (int64_t M : {1, 2, 5, 8}) {
    const auto x = activations(M * 1024, 10 + M);
    std::vector<float> ya(M * 40), yb(M * 24), yc(M * 33);
    const LinearOut outs[] = {{&pa.w, nullptr, ya.data()}, {&pb.w, nullptr, yb.data()},
                              {&wc, nullptr, yc.data()}};
    linear_multi(x.data(), M, outs, pool);
    EXPECT_TRUE(test::same_bits(ya.data(), oracle(x.data(), M, a.view(), nullptr).data(), ya.size()))
        << "M=" << M;
    EXPECT_TRUE(test::same_bits(yb.data(), oracle(x.data(), M, b.view(), nullptr).data(), yb.size()))
        << "M=" << M;
    EXPECT_TRUE(test::same_bits(yc.data(), oracle(x.data(), M, wc, nullptr).data(), yc.size()))
        << "M=" << M;
    std::vector<float> ga(M * 40), gc(M * 33);
    const LinearJob jobs[] = {{x.data(), M, &pa.w, nullptr, ga.data()},
                              {x.data(), M, &wc, nullptr, gc.data()}};
    linear_grouped(jobs, pool);
    EXPECT_TRUE(test::same_bits(ga.data(), ya.data(), ya.size())) << "M=" << M;
    EXPECT_TRUE(test::same_bits(gc.data(), yc.data(), yc.size())) << "M=" << M;
  }
}

TEST(QuantPanels, CpuPlaceBuildsPanelsOnlyWhereTheyServe) {
  const QuantizedMatrix q = quantized({4, 64, 37, 1024}, DType::BF16, 7);
  const QuantizedMatrix odd = quantized({4, 16, 8, 256}, DType::BF16, 7);  // not covered
  ThreadPool pool(2);
  const auto be = make_backend(Device::Cpu, &pool);
  {
    QuantDotScope mode(QuantDot::Float);
    EXPECT_EQ(be->place(q.view()).panels, nullptr) << "the float quant dot reads no panels";
  }
  QuantDotScope mode(QuantDot::Int8);
  EXPECT_EQ(be->place_table(q.view()).panels, nullptr) << "a lookup table reads no panels";
  EXPECT_EQ(be->place(odd.view()).panels, nullptr);
  const Weight placed = be->place(q.view());
  ASSERT_EQ(placed.panels != nullptr, cpu_panels());
  const auto x = activations(3 * 1024, 21);
  for (int64_t M : {1, 3}) {
    std::vector<float> y(M * 37);
    be->linear(x.data(), M, placed, nullptr, y.data());
    EXPECT_TRUE(test::same_bits(y.data(), oracle(x.data(), M, q.view(), nullptr).data(), y.size()))
        << "M=" << M;
  }
}

}  // namespace
}  // namespace lockstep::kernels
