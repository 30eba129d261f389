// The fused CUDA ops against the ops they replace, bit for bit: add_rms_norm = add then rms_norm,
// attention_prep = copy_2d (gated q), q/k rms_norm, rope, kv_write; linear_multi = one linear() per
// weight. Each for M = 1, 2, 7, 64, 300 (linear_multi: every M up to 64 and the tiled sizes), and a
// row computed alone against the same row inside a batch. The rms_norm kernel is also checked
// against a host emulation of its fixed schedule (256 lanes, xor butterfly, warps in order), which
// pins its bits to the schedule it has always had.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/backend.h"
#include "cuda_test_util.h"

namespace lockstep::kernels::cuda::test {
namespace {

const int64_t kMs[] = {1, 2, 7, 64, 300};

// The GPU rms_norm schedule on the host: lane i sums x[d]^2 for d = i, i + 256, ... with fmaf;
// per warp of 32 lanes a xor butterfly (offsets 16, 8, 4, 2, 1); warps added in order.
std::vector<float> emulate_rms_norm(const std::vector<float>& x, int64_t M, int64_t D,
                                    const std::vector<float>& w, float eps, bool zc) {
  std::vector<float> y(M * D);
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = &x[m * D];
    float lane[256];
    for (int i = 0; i < 256; ++i) {
      float s = 0.0f;
      for (int64_t d = i; d < D; d += 256) s = std::fma(xr[d], xr[d], s);
      lane[i] = s;
    }
    float total = 0.0f;
    for (int wp = 0; wp < 8; ++wp) {
      float v[32];
      for (int l = 0; l < 32; ++l) v[l] = lane[wp * 32 + l];
      for (int o = 16; o > 0; o >>= 1) {
        float n[32];
        for (int l = 0; l < 32; ++l) n[l] = v[l] + v[l ^ o];
        std::copy(n, n + 32, v);
      }
      total = wp == 0 ? v[0] : total + v[0];
    }
    const volatile float mean = total / static_cast<float>(D);
    const volatile float root = std::sqrt(mean + eps);
    const float r = 1.0f / root;
    for (int64_t d = 0; d < D; ++d) {
      const volatile float xs = xr[d] * r;
      y[m * D + d] = xs * (zc ? 1.0f + w[d] : w[d]);
    }
  }
  return y;
}

TEST_F(CudaTest, RmsNormKeepsItsSchedule) {
  for (int64_t D : {4096, 1024, 1000, 128, 256, 512, 5000}) {  // 512: Gemma 4's head norms
    for (bool zc : {false, true}) {
      const int64_t M = 7;
      const auto x = random_floats(M * D, 41, -3.0f, 3.0f);
      const auto w = random_floats(D, 42, 0.5f, 1.5f);
      DeviceBuffer<float> dx(x), dw(w), dy(M * D);
      rms_norm(dx.get(), M, D, dw.get(), 1e-6f, zc, dy.get());
      const auto want = emulate_rms_norm(x, M, D, w, 1e-6f, zc);
      ASSERT_TRUE(same_bits(dy.to_host().data(), want.data(), M * D)) << "D=" << D << " zc=" << zc;
    }
  }
}

TEST_F(CudaTest, AddRmsNormIsAddThenRmsNorm) {
  for (int64_t D : {4096, 1024, 1000, 128, 5000}) {
    for (bool zc : {false, true}) {
      const int64_t P = 300;
      const auto x = random_floats(P * D, 51, -3.0f, 3.0f);
      const auto delta = random_floats(P * D, 52, -1.0f, 1.0f);
      const auto w = random_floats(D, 53, 0.5f, 1.5f);
      DeviceBuffer<float> dw(w), ddelta(delta);
      // Each row alone (M = 1), fused.
      DeviceBuffer<float> alone_x(x), alone_y(P * D);
      for (int64_t r = 0; r < P; ++r)
        add_rms_norm(alone_x.get() + r * D, ddelta.get() + r * D, 1, D, dw.get(), 1e-6f, zc,
                     alone_y.get() + r * D);
      const auto ax = alone_x.to_host(), ay = alone_y.to_host();
      for (int64_t M : kMs) {
        const int64_t start = (M * 13) % (P - M + 1);
        DeviceBuffer<float> ux(std::vector<float>(x.begin() + start * D, x.begin() + (start + M) * D));
        DeviceBuffer<float> fx(std::vector<float>(x.begin() + start * D, x.begin() + (start + M) * D));
        DeviceBuffer<float> uy(M * D), fy(M * D);
        add(ux.get(), ddelta.get() + start * D, M * D);
        rms_norm(ux.get(), M, D, dw.get(), 1e-6f, zc, uy.get());
        add_rms_norm(fx.get(), ddelta.get() + start * D, M, D, dw.get(), 1e-6f, zc, fy.get());
        const auto hux = ux.to_host(), hfx = fx.to_host(), huy = uy.to_host(), hfy = fy.to_host();
        ASSERT_TRUE(same_bits(hfx.data(), hux.data(), M * D)) << "x, D=" << D << " M=" << M;
        ASSERT_TRUE(same_bits(hfy.data(), huy.data(), M * D)) << "y, D=" << D << " M=" << M;
        ASSERT_TRUE(same_bits(hfy.data(), ay.data() + start * D, M * D))
            << "rows in a batch of " << M << " differ from the rows alone, D=" << D;
        ASSERT_TRUE(same_bits(hfx.data(), ax.data() + start * D, M * D)) << "x alone, D=" << D;
      }
      // y == x (in place) too.
      DeviceBuffer<float> ip(x);
      add_rms_norm(ip.get(), ddelta.get(), P, D, dw.get(), 1e-6f, zc, ip.get());
      ASSERT_TRUE(same_bits(ip.to_host().data(), ay.data(), P * D)) << "in place, D=" << D;
    }
  }
}

struct PrepCase {
  int64_t n_heads, n_kv, hd, rotary;
  bool gated, norm, zc;
};

// attention_prep against the unfused ops, for every M in kMs, and rows alone vs in the batch.
void check_prep(const PrepCase& c) {
  const int64_t P = 300, nh = c.n_heads, nkv = c.n_kv, hd = c.hd;
  const int64_t qin_stride = c.gated ? 2 * hd : hd, kvd = nkv * hd;
  const auto qin = random_floats(P * nh * qin_stride, 61, -2.0f, 2.0f);
  const auto k = random_floats(P * kvd, 62, -2.0f, 2.0f);
  const auto v = random_floats(P * kvd, 63, -2.0f, 2.0f);
  const auto qn = random_floats(hd, 64, 0.5f, 1.5f), kn = random_floats(hd, 65, 0.5f, 1.5f);
  const auto cs = random_floats(P * std::max<int64_t>(c.rotary, 1), 66);
  const int64_t slots_total = 2 * P;
  std::vector<int32_t> slots(P);
  for (int64_t t = 0; t < P; ++t) slots[t] = static_cast<int32_t>((t * 7 + 3) % slots_total);
  DeviceBuffer<float> dqn(qn), dkn(kn), dcs(cs), dv(v);
  DeviceBuffer<int32_t> dslots(slots);

  struct Out {
    std::vector<float> q, k;
    std::vector<uint16_t> kc, vc;  // the BF16 cache (kKvDtype)
  };
  // rows [start, start + M) through the fused op (fused) or the ops one by one.
  auto run = [&](int64_t start, int64_t M, bool fused) {
    DeviceBuffer<float> dqin(std::vector<float>(qin.begin() + start * nh * qin_stride,
                                                qin.begin() + (start + M) * nh * qin_stride));
    DeviceBuffer<float> dk(std::vector<float>(k.begin() + start * kvd, k.begin() + (start + M) * kvd));
    DeviceBuffer<float> dq(M * nh * hd);
    DeviceBuffer<uint16_t> kc(slots_total * kvd), vc(slots_total * kvd);
    fill_zero(kc.get(), slots_total * kvd * 2);
    fill_zero(vc.get(), slots_total * kvd * 2);
    float* q = c.gated ? dq.get() : dqin.get();
    KvLayerView kv;
    kv.k = kc.get();
    kv.v = vc.get();
    kv.n_kv_heads = nkv;
    kv.head_dim = hd;
    kv.block_tokens = 16;
    kv.dtype = kKvDtype;
    const float* vrows = dv.get() + start * kvd;
    const float* rows_cs = dcs.get() + start * c.rotary;
    const int32_t* rows_slots = dslots.get() + start;
    if (fused) {
      AttentionPrep p;
      p.q_in = dqin.get();
      p.q_in_stride = qin_stride;
      p.q = q;
      p.k = dk.get();
      p.v = vrows;
      p.T = M;
      p.n_heads = nh;
      p.q_norm = c.norm ? dqn.get() : nullptr;
      p.k_norm = c.norm ? dkn.get() : nullptr;
      p.eps = 1e-6f;
      p.zero_centered = c.zc;
      p.rotary_dim = c.rotary;
      p.cos_sin = rows_cs;
      p.slots = rows_slots;
      attention_prep(p, kv);
    } else {
      if (c.gated) copy_2d(q, hd, dqin.get(), 2 * hd, M * nh, hd);
      if (c.norm) {
        rms_norm(q, M * nh, hd, dqn.get(), 1e-6f, c.zc, q);
        rms_norm(dk.get(), M * nkv, hd, dkn.get(), 1e-6f, c.zc, dk.get());
      }
      rope(q, M, nh, hd, c.rotary, rows_cs);
      rope(dk.get(), M, nkv, hd, c.rotary, rows_cs);
      kv_write(dk.get(), vrows, M, kvd, rows_slots, kc.get(), vc.get());
    }
    Out o;
    o.q = c.gated ? dq.to_host() : dqin.to_host();
    o.k = dk.to_host();
    o.kc = kc.to_host();
    o.vc = vc.to_host();
    return o;
  };
  const std::string what = "heads " + std::to_string(nh) + "/" + std::to_string(nkv) + " hd " +
                           std::to_string(hd) + " rotary " + std::to_string(c.rotary) +
                           (c.gated ? " gated" : "") + (c.norm ? " norm" : "") +
                           (c.zc ? " zc" : "");
  for (int64_t M : kMs) {
    const int64_t start = (M * 13) % (P - M + 1);
    const Out f = run(start, M, true), u = run(start, M, false);
    ASSERT_TRUE(same_bits(f.q.data(), u.q.data(), f.q.size())) << what << " q, M=" << M;
    ASSERT_TRUE(same_bits(f.k.data(), u.k.data(), f.k.size())) << what << " k, M=" << M;
    ASSERT_TRUE(same_bits(f.kc.data(), u.kc.data(), f.kc.size())) << what << " k cache, M=" << M;
    ASSERT_TRUE(same_bits(f.vc.data(), u.vc.data(), f.vc.size())) << what << " v cache, M=" << M;
    // The cache holds exactly bf16_rne of the op's own k output and of v.
    for (int64_t t = 0; t < M; ++t)
      for (int64_t j = 0; j < kvd; ++j) {
        const int64_t at = slots[start + t] * kvd + j;
        ASSERT_EQ(f.kc[at], f32_to_bf16(f.k[t * kvd + j])) << what << " k cache, M=" << M;
        ASSERT_EQ(f.vc[at], f32_to_bf16(v[(start + t) * kvd + j])) << what << " v cache, M=" << M;
      }
    // Rows alone (spot-check three of them) equal the same rows of the batch.
    for (int64_t i : {int64_t{0}, M / 2, M - 1}) {
      const Out a = run(start + i, 1, true);
      ASSERT_TRUE(same_bits(a.q.data(), f.q.data() + i * nh * hd, nh * hd))
          << what << " q row " << i << " alone vs in a batch of " << M;
      ASSERT_TRUE(same_bits(a.k.data(), f.k.data() + i * kvd, kvd))
          << what << " k row " << i << " alone vs in a batch of " << M;
      const int64_t s = slots[start + i];
      ASSERT_TRUE(same_bits(a.kc.data() + s * kvd, f.kc.data() + s * kvd, kvd)) << what;
      ASSERT_TRUE(same_bits(a.vc.data() + s * kvd, f.vc.data() + s * kvd, kvd)) << what;
    }
  }
}

TEST_F(CudaTest, AttentionPrepIsNormRopeKvWrite) {
  check_prep({32, 8, 128, 128, false, true, false});   // Qwen3-8B
  check_prep({16, 8, 128, 128, false, false, false});  // llama / qwen2: no q/k norm
  check_prep({8, 2, 256, 64, true, true, true});       // Qwen3.5: gated, partial rotary, (1 + w)
  check_prep({4, 4, 64, 32, false, true, true});
  check_prep({2, 1, 80, 0, false, true, false});       // no rotary dims at all
  check_prep({4, 2, 512, 128, false, true, false});    // past the fused kernel: the op loop
  check_prep({8, 1, 512, 512, false, true, false});    // Gemma 4's full layers (whole-head RoPE)
  check_prep({2, 2, 1536, 64, false, true, false});    // past the fused kernel: the op loop
}

// linear_multi: each output bitwise what linear() gives for its weight alone, for groups that mix
// split counts (S = 4, 2, 1), more weights than one launch takes, biases and none.
TEST_F(CudaTest, LinearMultiIsOneLinearPerWeight) {
  struct W {
    int64_t N;
    bool bias;
  };
  struct Set {
    int64_t K;
    std::vector<W> ws;
  };
  const std::vector<Set> sets = {
      {4096, {{4096, false}, {1024, true}, {1024, false}}},  // Qwen3-8B q/k/v (S 4, 4, 4)
      {4096, {{12288, false}, {12288, false}}},              // gate/up (S 2)
      {1024,
       {{6144, false}, {16384, false}, {2048, true}, {16, false}, {8192, false}, {16, true},
        {1024, false}}},  // S 4, 1, 4, 4, 2, 4, 4: two launches of S 4
      {512, {{200, true}, {96, false}, {333, false}, {8, false}, {40, true}}},  // S 2/1 by K
  };
  int checked = 0;
  for (const Set& set : sets) {
    const int64_t K = set.K, P = 300;
    std::vector<DeviceBuffer<uint16_t>> dw;
    std::vector<DeviceBuffer<float>> db;
    std::vector<Weight> wts;
    for (size_t i = 0; i < set.ws.size(); ++i) {
      dw.emplace_back(random_bf16(set.ws[i].N * K, 70 + static_cast<uint32_t>(i)));
      db.emplace_back(random_floats(set.ws[i].N, 80 + static_cast<uint32_t>(i)));
      Weight w;
      w.dtype = DType::BF16;
      w.rows = set.ws[i].N;
      w.cols = K;
      w.data = dw.back().get();
      wts.push_back(w);
    }
    const auto x = random_floats(P * K, 90, -2.0f, 2.0f);
    DeviceBuffer<float> dx(x);
    std::vector<std::pair<int64_t, int>> Ms;
    for (int64_t m = 1; m <= 64; ++m) Ms.push_back({m, 0});
    for (int64_t m : {65, 100, 129, 300}) Ms.push_back({m, 0});
    for (int tile = 1; tile <= 3; ++tile) Ms.push_back({66 + tile * 50, tile});
    struct Reset {
      ~Reset() { testing::set_linear_tile_override(0); }
    } reset;
    for (const auto& [M, tile] : Ms) {
      testing::set_linear_tile_override(tile);
      const float* xm = dx.get() + ((M * 37) % (P - M + 1)) * K;
      std::vector<DeviceBuffer<float>> ys, refs;
      std::vector<LinearOut> outs;
      for (size_t i = 0; i < wts.size(); ++i) {
        const float* bias = set.ws[i].bias ? db[i].get() : nullptr;
        refs.emplace_back(M * wts[i].rows);
        ys.emplace_back(M * wts[i].rows);
        linear(xm, M, wts[i], bias, refs.back().get());
        outs.push_back({&wts[i], bias, ys.back().get()});
      }
      linear_multi(xm, M, outs.data(), static_cast<int64_t>(outs.size()));
      for (size_t i = 0; i < wts.size(); ++i) {
        const auto y = ys[i].to_host(), r = refs[i].to_host();
        ASSERT_TRUE(same_bits(y.data(), r.data(), y.size()))
            << "K=" << K << " weight " << i << " (N=" << wts[i].rows << ") M=" << M << " tile "
            << tile << ": linear_multi differs from linear";
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST_F(CudaTest, LinearMultiRejectsMixedK) {
  DeviceBuffer<uint16_t> a(32 * 64), b(32 * 128);
  DeviceBuffer<float> dx(128), ya(32), yb(32);
  Weight wa, wb;
  wa.dtype = wb.dtype = DType::BF16;
  wa.rows = wb.rows = 32;
  wa.cols = 64;
  wb.cols = 128;
  wa.data = a.get();
  wb.data = b.get();
  const LinearOut outs[] = {{&wa, nullptr, ya.get()}, {&wb, nullptr, yb.get()}};
  EXPECT_THROW(linear_multi(dx.get(), 1, outs, 2), Error);
}

// Through the backend, recorded and replayed as a CUDA graph: the fused ops give the eager bits.
TEST_F(CudaTest, FusedOpsReplayFromAGraph) {
  auto be = make_cuda_backend();
  const int64_t H = 1024, nh = 8, nkv = 2, hd = 128, T = 3;
  std::vector<uint16_t> wq = random_bf16(nh * hd * H, 101), wk = random_bf16(nkv * hd * H, 102),
                        wv = random_bf16(nkv * hd * H, 103);
  DeviceBuffer<uint16_t> bq(wq), bk(wk), bv(wv);
  auto weight = [&](const DeviceBuffer<uint16_t>& b, int64_t rows) {
    Weight w;
    w.dtype = DType::BF16;
    w.rows = rows;
    w.cols = H;
    w.data = b.get();
    return w;
  };
  const Weight Wq = weight(bq, nh * hd), Wk = weight(bk, nkv * hd), Wv = weight(bv, nkv * hd);
  Floats x = be->upload(random_floats(T * H, 104)), delta = be->upload(random_floats(T * H, 105));
  Floats norm_w = be->upload(random_floats(H, 106, 0.5f, 1.5f));
  Floats qk_w = be->upload(random_floats(hd, 107, 0.5f, 1.5f));
  Floats cs = be->upload(random_floats(T * hd, 108));
  Ints slots = be->upload(std::vector<int32_t>{5, 1, 9});
  ASSERT_EQ(be->kv_dtype(), kKvDtype);
  DeviceArray<uint16_t> kc = be->upload(std::vector<uint16_t>(16 * nkv * hd, 0));
  DeviceArray<uint16_t> vc = be->upload(std::vector<uint16_t>(16 * nkv * hd, 0));
  Floats h = be->array<float>(T * H), q = be->array<float>(T * nh * hd),
         k = be->array<float>(T * nkv * hd), v = be->array<float>(T * nkv * hd);
  KvLayerView kv;
  kv.k = kc.data();
  kv.v = vc.data();
  kv.n_kv_heads = nkv;
  kv.head_dim = hd;
  kv.block_tokens = 16;
  kv.dtype = be->kv_dtype();
  const std::vector<float> x0 = be->download(x.data(), T * H);
  auto step = [&](const std::string& key) {
    be->upload(x.data(), x0.data(), x0.size() * sizeof(float));  // the same input every time
    be->begin_step(key);
    be->add_rms_norm(x.data(), delta.data(), T, H, norm_w.data(), 1e-6f, false, h.data());
    const LinearOut outs[] = {{&Wq, nullptr, q.data()}, {&Wk, nullptr, k.data()},
                              {&Wv, nullptr, v.data()}};
    be->linear_multi(h.data(), T, outs);
    AttentionPrep p;
    p.q_in = q.data();
    p.q_in_stride = hd;
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.T = T;
    p.n_heads = nh;
    p.q_norm = qk_w.data();
    p.k_norm = qk_w.data();
    p.eps = 1e-6f;
    p.rotary_dim = hd;
    p.cos_sin = cs.data();
    p.slots = slots.data();
    be->attention_prep(p, kv);
    std::vector<float> out = be->download(q.data(), T * nh * hd);
    const std::vector<uint16_t> kcache = be->download(kc.data(), 16 * nkv * hd);
    for (uint16_t e : kcache) out.push_back(bf16_to_f32(e));  // exact
    const std::vector<float> xs = be->download(x.data(), T * H);
    out.insert(out.end(), xs.begin(), xs.end());
    be->end_step(true);
    return out;
  };
  const std::vector<float> eager = step("");
  for (int i = 0; i < 4; ++i) {  // eager, capture, replay, replay
    const std::vector<float> got = step("fused");
    ASSERT_TRUE(same_bits(got.data(), eager.data(), eager.size())) << "run " << i;
  }
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
