// Programmatic dependent launch (common.cuh) changes scheduling only: a decode-like chain of ops
// (add_rms_norm, q/k/v linear_multi, attention_prep with its cache write, split attention and
// merge, o_proj, gate/up, silu_mul, down, a device copy, a memset and copy_2d in between, then
// the final norm and an lm_head-sized linear) gives the same bits eagerly with PDL off, eagerly with PDL
// on, and captured into a CUDA graph with PDL on and replayed twice; the captured graph keeps
// programmatic (kernel -> kernel) edges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "cuda_test_util.h"

namespace lockstep::kernels::cuda::test {
namespace {

constexpr int64_t kD = 1024, kHeads = 8, kKv = 2, kHd = 128, kF = 3072, kV = 16384;
constexpr int64_t kBlock = 16, kBlocksPerRow = 24;  // up to 384 positions per row

struct Net {
  int64_t T;
  DeviceBuffer<uint16_t> wq, wk, wv, wo, wg, wu, wd, wl;
  Weight q, k, v, o, g, u, d, lm;
  DeviceBuffer<float> ln1, ln2, lnf, qn, kn, cos_sin;
  DeviceBuffer<int32_t> tables, n_keys, slots;
  int64_t max_keys = 0;
  // State (reset before each run) and activations.
  std::vector<float> x0;
  std::vector<uint16_t> kc0, vc0;  // the BF16 cache (kKvDtype)
  DeviceBuffer<float> x, delta, h, qb, kb, vb, attn, gb, ub, act, save, zeroed, logits;
  DeviceBuffer<uint16_t> kc, vc;

  static Weight bf16(const DeviceBuffer<uint16_t>& b, int64_t rows, int64_t cols) {
    Weight w;
    w.dtype = DType::BF16;
    w.rows = rows;
    w.cols = cols;
    w.data = b.get();
    return w;
  }

  explicit Net(int64_t T_) : T(T_) {
    wq = DeviceBuffer<uint16_t>(random_bf16(kHeads * kHd * kD, 1));
    wk = DeviceBuffer<uint16_t>(random_bf16(kKv * kHd * kD, 2));
    wv = DeviceBuffer<uint16_t>(random_bf16(kKv * kHd * kD, 3));
    wo = DeviceBuffer<uint16_t>(random_bf16(kD * kHeads * kHd, 4));
    wg = DeviceBuffer<uint16_t>(random_bf16(kF * kD, 5));
    wu = DeviceBuffer<uint16_t>(random_bf16(kF * kD, 6));
    wd = DeviceBuffer<uint16_t>(random_bf16(kD * kF, 7, 0.02f));
    wl = DeviceBuffer<uint16_t>(random_bf16(kV * kD, 8));
    q = bf16(wq, kHeads * kHd, kD), k = bf16(wk, kKv * kHd, kD), v = bf16(wv, kKv * kHd, kD);
    o = bf16(wo, kD, kHeads * kHd), g = bf16(wg, kF, kD), u = bf16(wu, kF, kD);
    d = bf16(wd, kD, kF), lm = bf16(wl, kV, kD);
    ln1 = DeviceBuffer<float>(random_floats(kD, 11, 0.5f, 1.5f));
    ln2 = DeviceBuffer<float>(random_floats(kD, 12, 0.5f, 1.5f));
    lnf = DeviceBuffer<float>(random_floats(kD, 13, 0.5f, 1.5f));
    qn = DeviceBuffer<float>(random_floats(kHd, 14, 0.5f, 1.5f));
    kn = DeviceBuffer<float>(random_floats(kHd, 15, 0.5f, 1.5f));
    cos_sin = DeviceBuffer<float>(random_floats(T * kHd, 16));
    // Row t: its own blocks, n_keys 300, 290, 17, ... (the new token at position n_keys - 1).
    std::vector<int32_t> tab(T * kBlocksPerRow), nk(T), sl(T);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t b = 0; b < kBlocksPerRow; ++b)
        tab[t * kBlocksPerRow + b] = static_cast<int32_t>((T - 1 - t) * kBlocksPerRow + b);
      nk[t] = static_cast<int32_t>(t % 3 == 0 ? 300 - t : (t % 3 == 1 ? 290 : 17));
      const int64_t pos = nk[t] - 1;
      sl[t] = static_cast<int32_t>(tab[t * kBlocksPerRow + pos / kBlock] * kBlock + pos % kBlock);
      max_keys = std::max<int64_t>(max_keys, nk[t]);
    }
    tables = DeviceBuffer<int32_t>(tab);
    n_keys = DeviceBuffer<int32_t>(nk);
    slots = DeviceBuffer<int32_t>(sl);
    const int64_t cache = T * kBlocksPerRow * kBlock * kKv * kHd;
    x0 = random_floats(T * kD, 21, -2.0f, 2.0f);
    kc0 = kv_elements(random_floats(cache, 22));
    vc0 = kv_elements(random_floats(cache, 23));
    x = DeviceBuffer<float>(T * kD), delta = DeviceBuffer<float>(T * kD);
    h = DeviceBuffer<float>(T * kD), qb = DeviceBuffer<float>(T * kHeads * kHd);
    kb = DeviceBuffer<float>(T * kKv * kHd), vb = DeviceBuffer<float>(T * kKv * kHd);
    attn = DeviceBuffer<float>(T * kHeads * kHd), gb = DeviceBuffer<float>(T * kF);
    ub = DeviceBuffer<float>(T * kF), act = DeviceBuffer<float>(T * kF);
    save = DeviceBuffer<float>(T * kD), zeroed = DeviceBuffer<float>(T * kD);
    kc = DeviceBuffer<uint16_t>(cache), vc = DeviceBuffer<uint16_t>(cache);
    logits = DeviceBuffer<float>(T * kV);
  }

  void reset() {
    upload(x.get(), x0.data(), x0.size() * 4);
    upload(kc.get(), kc0.data(), kc0.size() * 2);
    upload(vc.get(), vc0.data(), vc0.size() * 2);
    const std::vector<float> small(T * kD, 0.25f);
    upload(delta.get(), small.data(), small.size() * 4);
    synchronize();
  }

  // Two layers, then the final norm and logits: every op reads the previous op's output.
  void step() {
    const KvLayerView kv{kc.get(), vc.get(), kBlock, kKv, kHd, kKvDtype};
    for (int layer = 0; layer < 2; ++layer) {
      add_rms_norm(x.get(), delta.get(), T, kD, ln1.get(), 1e-6f, false, h.get());
      const LinearOut qkv[] = {{&q, nullptr, qb.get()}, {&k, nullptr, kb.get()}, {&v, nullptr, vb.get()}};
      linear_multi(h.get(), T, qkv, 3);
      AttentionPrep p;
      p.q_in = qb.get(), p.q_in_stride = kHd, p.q = qb.get(), p.k = kb.get(), p.v = vb.get();
      p.T = T, p.n_heads = kHeads, p.q_norm = qn.get(), p.k_norm = kn.get(), p.eps = 1e-6f;
      p.rotary_dim = kHd, p.cos_sin = cos_sin.get(), p.slots = slots.get();
      attention_prep(p, kv);
      attention(qb.get(), T, tables.get(), kBlocksPerRow, n_keys.get(), max_keys, kHeads, kv,
                0.0883883f, attn.get());
      linear(attn.get(), T, o, nullptr, delta.get());
      add_rms_norm(x.get(), delta.get(), T, kD, ln2.get(), 1e-6f, false, h.get());
      copy(save.get(), x.get(), T * kD * 4);  // a copy node between kernels
      const LinearOut gu[] = {{&g, nullptr, gb.get()}, {&u, nullptr, ub.get()}};
      linear_multi(h.get(), T, gu, 2);
      silu_mul(gb.get(), ub.get(), act.get(), T * kF);
      fill_zero(zeroed.get(), T * kD * 4);  // a memset node between kernels
      linear(act.get(), T, d, nullptr, delta.get());
      add(delta.get(), zeroed.get(), T * kD);
      copy_2d(attn.get(), kD, save.get(), kD, T, kD);  // the copy kernel (attn is free by now)
      add(delta.get(), attn.get(), T * kD);
    }
    rms_norm(x.get(), T, kD, lnf.get(), 1e-6f, false, h.get());
    linear(h.get(), T, lm, nullptr, logits.get());
  }

  struct Out {
    std::vector<float> x, delta, logits;
    std::vector<uint16_t> kc;
  };
  Out read() const { return {x.to_host(), delta.to_host(), logits.to_host(), kc.to_host()}; }
};

bool same(const Net::Out& a, const Net::Out& b) {
  return same_bits(a.x.data(), b.x.data(), a.x.size()) &&
         same_bits(a.delta.data(), b.delta.data(), a.delta.size()) &&
         same_bits(a.logits.data(), b.logits.data(), a.logits.size()) &&
         same_bits(a.kc.data(), b.kc.data(), a.kc.size());
}

TEST_F(CudaTest, PdlGraphReplayKeepsTheBits) {
  for (int64_t T : {1, 3, 20}) {
    Net net(T);
    testing::set_pdl(2);
    net.reset();
    net.step();
    const Net::Out want = net.read();

    testing::set_pdl(1);
    net.reset();
    net.step();
    EXPECT_TRUE(same(net.read(), want)) << "T=" << T << ": eager with PDL";

    net.reset();
    begin_capture();
    net.step();
    void* graph = end_capture();
    // Where the device or its code has no PDL (device_caps.h) the edges stay plain: asking for
    // PDL must not turn on a launch attribute whose kernels do not wait.
    if (device_caps().pdl)
      EXPECT_GT(testing::last_graph_programmatic_edges(), 10) << "T=" << T;
    else
      EXPECT_EQ(testing::last_graph_programmatic_edges(), 0) << "T=" << T;
    for (int rep = 0; rep < 2; ++rep) {
      net.reset();
      launch_graph(graph);
      EXPECT_TRUE(same(net.read(), want)) << "T=" << T << ": graph replay " << rep << " with PDL";
    }
    destroy_graph(graph);

    testing::set_pdl(2);
    net.reset();
    begin_capture();
    net.step();
    graph = end_capture();
    EXPECT_EQ(testing::last_graph_programmatic_edges(), 0) << "T=" << T;
    net.reset();
    launch_graph(graph);
    EXPECT_TRUE(same(net.read(), want)) << "T=" << T << ": graph replay without PDL";
    destroy_graph(graph);
    testing::set_pdl(0);
  }
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
