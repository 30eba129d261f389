// CUDA per-row and per-element ops against the CPU kernels, and rms_norm rows across M.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/math.h"
#include "kernels/ops.h"
#include "cuda_test_util.h"

namespace lockstep::kernels::cuda::test {
namespace {

void expect_close(const std::vector<float>& gpu, const std::vector<float>& cpu, double rel,
                  const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size());
  size_t bad = 0, exact = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (gpu[i] == cpu[i]) ++exact;
    if (!(std::fabs(double(gpu[i]) - cpu[i]) <= rel * std::fabs(double(cpu[i])) + 1e-7)) {
      if (bad++ < 5) ADD_FAILURE() << what << "[" << i << "]: GPU " << gpu[i] << " CPU " << cpu[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what;
  std::printf("  %s: %zu of %zu elements bitwise equal to the CPU\n", what, exact, gpu.size());
}

TEST_F(CudaTest, RmsNormRowsAcrossMAndAccuracy) {
  for (int64_t D : {4096, 1000, 128}) {
    for (bool zc : {false, true}) {
      const int64_t P = 300;
      const auto x = random_floats(P * D, 7, -3.0f, 3.0f);
      const auto w = random_floats(D, 8, 0.5f, 1.5f);
      DeviceBuffer<float> dx(x), dw(w), dref(P * D);
      for (int64_t r = 0; r < P; ++r)
        rms_norm(dx.get() + r * D, 1, D, dw.get(), 1e-6f, zc, dref.get() + r * D);
      const auto ref = dref.to_host();
      for (int64_t M : {2, 3, 64, 200, 300}) {
        const int64_t start = (M * 13) % (P - M + 1);
        DeviceBuffer<float> dy(M * D);
        rms_norm(dx.get() + start * D, M, D, dw.get(), 1e-6f, zc, dy.get());
        const auto y = dy.to_host();
        ASSERT_TRUE(same_bits(y.data(), ref.data() + start * D, M * D)) << "D=" << D << " M=" << M;
      }
      // In place.
      DeviceBuffer<float> dip(x);
      rms_norm(dip.get(), P, D, dw.get(), 1e-6f, zc, dip.get());
      ASSERT_TRUE(same_bits(dip.to_host().data(), ref.data(), P * D)) << "in place, D=" << D;
      std::vector<float> cpu(P * D);
      kernels::rms_norm(x.data(), P, D, w.data(), 1e-6f, zc, cpu.data());
      expect_close(ref, cpu, 1e-5, "rms_norm");
    }
  }
}

TEST_F(CudaTest, RopeMatchesCpu) {
  const int64_t M = 37, heads = 5;
  struct Case {
    int64_t hd, rot, turned;  // turned: pairs per half with a rotation (the rest cos 1, sin 0)
  };
  // Head dim 512: Gemma 4's full layers, partial rotary (128 of 512) and the proportional table
  // (the whole head, a quarter of each half turned).
  for (const Case c : {Case{128, 128, 64}, Case{128, 64, 32}, Case{512, 128, 64}, Case{512, 512, 64}}) {
    auto x = random_floats(M * heads * c.hd, 9, -2.0f, 2.0f);
    auto cs = random_floats(M * c.rot, 10);
    const int64_t half = c.rot / 2;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = c.turned; j < half; ++j) cs[m * c.rot + j] = 1.0f, cs[m * c.rot + half + j] = 0.0f;
    DeviceBuffer<float> dx(x), dcs(cs);
    rope(dx.get(), M, heads, c.hd, c.rot, dcs.get());
    kernels::rope(x.data(), M, heads, c.hd, c.rot, cs.data());
    expect_close(dx.to_host(), x, 1e-6, ("rope hd " + std::to_string(c.hd) + " rotary " + std::to_string(c.rot)).c_str());
  }
}

TEST_F(CudaTest, ActivationsMatchCpu) {
  const int64_t n = 100003;
  const auto g = random_floats(n, 11, -20.0f, 20.0f);
  const auto u = random_floats(n, 12, -3.0f, 3.0f);
  DeviceBuffer<float> dg(g), du(u), dout(n);
  silu_mul(dg.get(), du.get(), dout.get(), n);
  std::vector<float> cpu(n);
  kernels::silu_mul(g.data(), u.data(), cpu.data(), n);
  expect_close(dout.to_host(), cpu, 1e-6, "silu_mul");
  {  // n a multiple of 4: four elements a thread, the same bits as one a thread (n odd above)
    const int64_t n4 = 100000;
    DeviceBuffer<float> dout4(n4);
    silu_mul(dg.get(), du.get(), dout4.get(), n4);
    const auto one = dout.to_host(), four = dout4.to_host();
    for (int64_t i = 0; i < n4; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(four[i]), std::bit_cast<uint32_t>(one[i])) << "element " << i;
  }

  DeviceBuffer<float> dx(u);
  sigmoid_mul(dx.get(), dg.get(), n);
  std::vector<float> sm(n);
  for (int64_t i = 0; i < n; ++i) sm[i] = u[i] * sigmoid_f32(g[i]);
  expect_close(dx.to_host(), sm, 1e-6, "sigmoid_mul");

  DeviceBuffer<float> da(u);
  add(da.get(), dg.get(), n);
  std::vector<float> sum(n);
  for (int64_t i = 0; i < n; ++i) sum[i] = u[i] + g[i];
  EXPECT_TRUE(same_bits(da.to_host().data(), sum.data(), n)) << "add";
}

// Gemma's ops: the CPU's formulas in the CPU's operation order (math.h), so the same bits.
TEST_F(CudaTest, GemmaOpsMatchCpu) {
  const int64_t n = 100003;
  const auto g = random_floats(n, 21, -12.0f, 12.0f);
  const auto u = random_floats(n, 22, -3.0f, 3.0f);
  DeviceBuffer<float> dg(g), du(u), dout(n);
  gelu_tanh_mul(dg.get(), du.get(), dout.get(), n);
  std::vector<float> gelu(n), capped(n), scaled(n);
  for (int64_t i = 0; i < n; ++i) gelu[i] = gelu_tanh_f32(g[i]) * u[i];
  EXPECT_TRUE(same_bits(dout.to_host().data(), gelu.data(), n)) << "gelu_tanh_mul";
  DeviceBuffer<float> dc(g);
  softcap(dc.get(), n, 5.0f);
  for (int64_t i = 0; i < n; ++i) capped[i] = softcap_f32(g[i], 5.0f);
  EXPECT_TRUE(same_bits(dc.to_host().data(), capped.data(), n)) << "softcap";
  DeviceBuffer<float> ds(g);
  scale(ds.get(), n, 55.5f);
  for (int64_t i = 0; i < n; ++i) scaled[i] = g[i] * 55.5f;
  EXPECT_TRUE(same_bits(ds.to_host().data(), scaled.data(), n)) << "scale";
}

TEST_F(CudaTest, DataMovementOpsAreExact) {
  // copy_2d: gated attention's [query | gate] rows split into q and gate
  const int64_t rh = 21, hd = 64;
  const auto qg = random_floats(rh * 2 * hd, 13);
  DeviceBuffer<float> dqg(qg), dq(rh * hd), dgate(rh * hd);
  copy_2d(dq.get(), hd, dqg.get(), 2 * hd, rh, hd);
  copy_2d(dgate.get(), hd, dqg.get() + hd, 2 * hd, rh, hd);
  const auto q = dq.to_host(), gate = dgate.to_host();
  for (int64_t r = 0; r < rh; ++r)
    for (int64_t d = 0; d < hd; ++d) {
      ASSERT_EQ(q[r * hd + d], qg[r * 2 * hd + d]);
      ASSERT_EQ(gate[r * hd + d], qg[r * 2 * hd + hd + d]);
    }
  // ... and a prefill-sized block: more elements than the launch has threads (its grid-stride
  // loop), strides on both sides.
  {
    const int64_t rows = 3001, cols = 1100, ss = 1203, ds = 1111;
    const auto src = random_floats(rows * ss, 16);
    DeviceBuffer<float> dsrc(src), ddst(std::vector<float>(rows * ds, -7.0f));
    copy_2d(ddst.get(), ds, dsrc.get(), ss, rows, cols);
    const auto dst = ddst.to_host();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < ds; ++c)
        ASSERT_EQ(dst[r * ds + c], c < cols ? src[r * ss + c] : -7.0f) << r << "," << c;
  }
  // kv_write: the cache (kKvDtype, BF16) holds exactly bf16_rne of each key and value, ties to
  // even, signed zeros, subnormals, infinities and overflow included (NaN is left out: the GPU's
  // conversion gives the canonical NaN, the host's keeps the payload).
  const int64_t T = 5, kv_dim = 256, slots_total = 64;
  auto k = random_floats(T * kv_dim, 14), v = random_floats(T * kv_dim, 15);
  const float edge[] = {0x1.01p0f, 0x1.03p0f, -0x1.03p0f, 0x1.0301p0f, 0x1.02fffep0f,
                        0.0f, -0.0f, 1e-40f, -3e-39f, 0x1p-133f, INFINITY, -INFINITY,
                        3.4028235e38f, -3.39e38f, 65504.0f, 1e-30f};
  for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); ++i) {
    k[37 + i] = edge[i];
    v[kv_dim * 3 + 5 * i] = edge[i];
  }
  const std::vector<int32_t> slots = {7, 0, 63, 32, 8};
  DeviceBuffer<float> dk(k), dv(v);
  DeviceBuffer<uint16_t> kc(slots_total * kv_dim), vc(slots_total * kv_dim);
  DeviceBuffer<int32_t> dslots(slots);
  fill_zero(kc.get(), slots_total * kv_dim * 2);
  fill_zero(vc.get(), slots_total * kv_dim * 2);
  kv_write(dk.get(), dv.get(), T, kv_dim, dslots.get(), kc.get(), vc.get());
  const auto hk = kc.to_host(), hv = vc.to_host();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < kv_dim; ++j) {
      ASSERT_EQ(hk[slots[t] * kv_dim + j], f32_to_bf16(k[t * kv_dim + j])) << "k " << t << " " << j;
      ASSERT_EQ(hv[slots[t] * kv_dim + j], f32_to_bf16(v[t * kv_dim + j])) << "v " << t << " " << j;
    }
  EXPECT_EQ(hk[1 * kv_dim], 0u);
  // gather_rows
  const int64_t D = 300;
  const auto x = random_floats(10 * D, 16);
  const std::vector<int32_t> rows = {9, 0, 4, 4};
  DeviceBuffer<float> dx(x), dout(rows.size() * D);
  DeviceBuffer<int32_t> drows(rows);
  gather_rows(dx.get(), drows.get(), static_cast<int64_t>(rows.size()), D, dout.get());
  const auto out = dout.to_host();
  for (size_t i = 0; i < rows.size(); ++i)
    ASSERT_TRUE(same_bits(out.data() + i * D, x.data() + rows[i] * D, D)) << "gather row " << i;
  // embedding
  const int64_t V = 50, E = 96;
  const auto table = random_bf16(V * E, 17, 1.0f);
  const std::vector<int32_t> ids = {3, 49, 0, 3};
  DeviceBuffer<uint16_t> dt(table);
  DeviceBuffer<int32_t> dids(ids);
  DeviceBuffer<float> demb(ids.size() * E);
  Weight wt;
  wt.dtype = DType::BF16;
  wt.rows = V;
  wt.cols = E;
  wt.data = dt.get();
  embedding(wt, dids.get(), static_cast<int64_t>(ids.size()), demb.get());
  const auto emb = demb.to_host();
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t d = 0; d < E; ++d) ASSERT_EQ(emb[i * E + d], bf16_to_f32(table[ids[i] * E + d]));
}

// moe_combine: each token's k expert rows weighted and summed in rank order, then the gated shared
// expert; every operation rounded alone on both sides, so the GPU gives the CPU's bits. The rows
// may be named through a permutation (moe_group's slot): the bits of the gathered rows.
TEST_F(CudaTest, MoeCombineMatchesCpuBitwise) {
  const int64_t T = 7, k = 3, D = 200;
  const auto y = random_floats(T * k * D, 21), w = random_floats(T * k, 22, 0.0f, 1.0f);
  const auto shared = random_floats(T * D, 23), gate = random_floats(T, 24, -4.0f, 4.0f);
  std::vector<int32_t> perm(T * k);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(25);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<float> placed(T * k * D);  // y's row i stored at row perm[i]
  for (int64_t i = 0; i < T * k; ++i)
    std::copy(y.begin() + i * D, y.begin() + (i + 1) * D, placed.begin() + perm[i] * D);
  DeviceBuffer<float> dy(y), dplaced(placed), dw(w), dshared(shared), dgate(gate), dout(T * D),
      dplain(T * D), dvia(T * D);
  DeviceBuffer<int32_t> dperm(perm);
  moe_combine(dy.get(), nullptr, dw.get(), T, k, D, dshared.get(), dgate.get(), dout.get());
  moe_combine(dy.get(), nullptr, dw.get(), T, k, D, nullptr, nullptr, dplain.get());
  moe_combine(dplaced.get(), dperm.get(), dw.get(), T, k, D, dshared.get(), dgate.get(),
              dvia.get());
  std::vector<float> want(T * D), plain(T * D);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t d = 0; d < D; ++d) {
      float acc = w[t * k] * y[t * k * D + d];
      for (int64_t j = 1; j < k; ++j) acc += w[t * k + j] * y[(t * k + j) * D + d];
      plain[t * D + d] = acc;
      want[t * D + d] = acc + sigmoid_f32(gate[t]) * shared[t * D + d];
    }
  EXPECT_TRUE(same_bits(dout.to_host().data(), want.data(), T * D)) << "with shared expert";
  EXPECT_TRUE(same_bits(dplain.to_host().data(), plain.data(), T * D)) << "routed only";
  EXPECT_TRUE(same_bits(dvia.to_host().data(), want.data(), T * D)) << "rows through slot";
}

TEST_F(CudaTest, DescribesDevice) {
  const std::string d = describe_device();
  std::printf("  device: %s\n", d.c_str());
  EXPECT_NE(d.find("SMs"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
