// The CPU backend's fused ops are exactly the ops they stand for (so the CPU keeps its bits when
// the models call them): add_rms_norm = x += delta then kernels::rms_norm; attention_prep = the
// gated q split, q/k rms_norm, rope and the KV cache copy, in that order. Rows computed alone
// equal the same rows in a batch.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "test_util.h"

namespace lockstep::kernels {
namespace {

const int64_t kMs[] = {1, 2, 7, 64, 300};

TEST(BackendFused, CpuAddRmsNormIsAddThenRmsNorm) {
  auto be = make_cpu_backend();
  for (int64_t D : {4096, 1000, 128, 7}) {
    for (bool zc : {false, true}) {
      const int64_t P = 300;
      const auto x = test::random_floats(P * D, 11, 2.0f), delta = test::random_floats(P * D, 12);
      const auto w = test::random_floats(D, 13);
      std::vector<float> want_x = x, want_y(P * D);
      for (int64_t i = 0; i < P * D; ++i) want_x[i] += delta[i];
      rms_norm(want_x.data(), P, D, w.data(), 1e-6f, zc, want_y.data());
      for (int64_t M : kMs) {
        const int64_t start = (M * 13) % (P - M + 1);
        std::vector<float> gx(x.begin() + start * D, x.begin() + (start + M) * D), gy(M * D);
        be->add_rms_norm(gx.data(), delta.data() + start * D, M, D, w.data(), 1e-6f, zc,
                         gy.data());
        ASSERT_TRUE(test::same_bits(gx.data(), want_x.data() + start * D, M * D)) << D << " " << M;
        ASSERT_TRUE(test::same_bits(gy.data(), want_y.data() + start * D, M * D)) << D << " " << M;
      }
      std::vector<float> ip = x;  // y == x
      be->add_rms_norm(ip.data(), delta.data(), P, D, w.data(), 1e-6f, zc, ip.data());
      ASSERT_TRUE(test::same_bits(ip.data(), want_y.data(), P * D)) << "in place, D=" << D;
    }
  }
}

struct PrepCase {
  int64_t nh, nkv, hd, rotary;
  bool gated, norm, zc;
};

void check_prep(const PrepCase& c) {
  auto be = make_cpu_backend();
  const int64_t P = 300, nh = c.nh, nkv = c.nkv, hd = c.hd, kvd = nkv * hd;
  const int64_t stride = c.gated ? 2 * hd : hd;
  const auto qin = test::random_floats(P * nh * stride, 21), k = test::random_floats(P * kvd, 22);
  const auto v = test::random_floats(P * kvd, 23);
  const auto qn = test::random_floats(hd, 24), kn = test::random_floats(hd, 25);
  const auto cs = test::random_floats(P * std::max<int64_t>(c.rotary, 1), 26);
  std::vector<int32_t> slots(P);
  for (int64_t t = 0; t < P; ++t) slots[t] = static_cast<int32_t>((t * 7 + 3) % (2 * P));

  // The reference for all P rows: the kernels one by one.
  std::vector<float> want_q(P * nh * hd), want_k = k, want_kc(2 * P * kvd, 0.0f),
      want_vc(2 * P * kvd, 0.0f);
  for (int64_t i = 0; i < P * nh; ++i)
    std::memcpy(&want_q[i * hd], &qin[i * stride], hd * sizeof(float));
  if (c.norm) {
    rms_norm(want_q.data(), P * nh, hd, qn.data(), 1e-6f, c.zc, want_q.data());
    rms_norm(want_k.data(), P * nkv, hd, kn.data(), 1e-6f, c.zc, want_k.data());
  }
  rope(want_q.data(), P, nh, hd, c.rotary, cs.data());
  rope(want_k.data(), P, nkv, hd, c.rotary, cs.data());
  for (int64_t t = 0; t < P; ++t) {
    std::memcpy(&want_kc[slots[t] * kvd], &want_k[t * kvd], kvd * sizeof(float));
    std::memcpy(&want_vc[slots[t] * kvd], &v[t * kvd], kvd * sizeof(float));
  }

  for (int64_t M : kMs) {
    const int64_t start = (M * 13) % (P - M + 1);
    std::vector<float> gin(qin.begin() + start * nh * stride, qin.begin() + (start + M) * nh * stride);
    std::vector<float> gq(M * nh * hd), gk(k.begin() + start * kvd, k.begin() + (start + M) * kvd);
    std::vector<float> kc(2 * P * kvd, 0.0f), vc(2 * P * kvd, 0.0f);
    KvLayerView kv;
    kv.k = kc.data();
    kv.v = vc.data();
    kv.n_kv_heads = nkv;
    kv.head_dim = hd;
    kv.block_tokens = 16;
    AttentionPrep p;
    p.q_in = gin.data();
    p.q_in_stride = stride;
    p.q = c.gated ? gq.data() : gin.data();
    p.k = gk.data();
    p.v = v.data() + start * kvd;
    p.T = M;
    p.n_heads = nh;
    p.q_norm = c.norm ? qn.data() : nullptr;
    p.k_norm = c.norm ? kn.data() : nullptr;
    p.eps = 1e-6f;
    p.zero_centered = c.zc;
    p.rotary_dim = c.rotary;
    p.cos_sin = cs.data() + start * c.rotary;
    p.slots = slots.data() + start;
    be->attention_prep(p, kv);
    ASSERT_TRUE(test::same_bits(p.q, want_q.data() + start * nh * hd, M * nh * hd)) << M;
    ASSERT_TRUE(test::same_bits(gk.data(), want_k.data() + start * kvd, M * kvd)) << M;
    for (int64_t t = start; t < start + M; ++t) {
      ASSERT_TRUE(test::same_bits(&kc[slots[t] * kvd], &want_kc[slots[t] * kvd], kvd)) << M;
      ASSERT_TRUE(test::same_bits(&vc[slots[t] * kvd], &want_vc[slots[t] * kvd], kvd)) << M;
    }
  }
}

TEST(BackendFused, CpuAttentionPrepIsTheOpsInOrder) {
  check_prep({8, 2, 128, 128, false, true, false});
  check_prep({4, 4, 64, 64, false, false, false});
  check_prep({4, 2, 256, 64, true, true, true});
  check_prep({2, 1, 80, 0, false, true, false});
}

}  // namespace
}  // namespace lockstep::kernels
