// Mixture of experts on the device (moe_route.cu, linear_experts.cu, models/moe_layer.cpp's device
// path): the device router gives bitwise route_tokens' expert ids and weights (ties, NaN rows,
// renormalised or not, Gemma 4's expert scale); the device grouping is the host's
// group_by_expert; the grouped expert linear is bitwise the per-expert linear() of each expert's
// rows (BF16, 4-bit and 8-bit kept quantized; 1 to 1000 tokens: the skinny launch and, past 64
// rows per expert, the tiled one; skewed routing with empty experts and one expert taking most
// rows), whichever kernel the per-expert call picks for its row count;
// a whole MoE layer through the device path equals the host-routed path bit for bit, eagerly
// and replayed from a CUDA graph while the routing changes every step; and host-routed calls
// (prefill chunks) through the grouped launches equal the per-expert path; a shared expert of the
// routed experts' shape run inside their grouped launches equals it run as its own MLP; a decode
// step's one-warp routing equals the general launches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/backend.h"
#include "models/attention_layer.h"
#include "models/moe_layer.h"
#include "models/moe_routing.h"
#include "quant_test_util.h"

namespace lockstep::kernels::cuda::test {
namespace {

using lockstep::ExpertGroups;
using lockstep::ExpertSet;
using lockstep::ExpertWeights;
using lockstep::Routing;

// Router logits with ties: values on a coarse grid (many equal probabilities), a few rows all
// equal, one row with a NaN and one with an infinity.
std::vector<float> tied_logits(int64_t T, int64_t E, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> grid(-8, 8);
  std::uniform_real_distribution<float> fine(-6.0f, 6.0f);
  std::vector<float> v(static_cast<size_t>(T * E));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e) {
      float x = t % 3 == 0 ? fine(rng) : 0.5f * static_cast<float>(grid(rng));
      if (t % 17 == 5) x = 1.25f;  // all equal
      v[t * E + e] = x;
    }
  if (T > 7) v[7 * E + E / 2] = NAN;
  if (T > 11) v[11 * E + 1] = INFINITY;
  return v;
}

void expect_same_routing(const Routing& want, const std::vector<int32_t>& ids,
                         const std::vector<float>& w, const std::string& what) {
  ASSERT_EQ(want.experts.size(), ids.size()) << what;
  size_t id_diff = 0, w_diff = 0, first = ids.size();
  for (size_t i = 0; i < ids.size(); ++i) {
    const bool d = want.experts[i] != ids[i] ||
                   std::memcmp(&want.weights[i], &w[i], sizeof(float)) != 0;
    id_diff += want.experts[i] != ids[i];
    w_diff += std::memcmp(&want.weights[i], &w[i], sizeof(float)) != 0;
    if (d && first == ids.size()) first = i;
  }
  EXPECT_EQ(id_diff + w_diff, 0u)
      << what << ": " << id_diff << " ids and " << w_diff << " weights differ, first at " << first
      << (first < ids.size() ? " (host " + std::to_string(want.experts[first]) + " " +
                                   std::to_string(want.weights[first]) + ", device " +
                                   std::to_string(ids[first]) + " " + std::to_string(w[first]) +
                                   ")"
                             : "");
}

TEST_F(CudaTest, DeviceRoutingIsHostRoutingBitwise) {
  struct Case {
    int64_t T, E, k;
  };
  const Case cases[] = {{1, 8, 2},     {3, 64, 8},    {64, 128, 8}, {300, 256, 8},
                        {33, 512, 10}, {200, 128, 1}, {40, 60, 32}, {129, 32, 4}};
  uint32_t seed = 1;
  for (const Case& c : cases)
    for (bool normalize : {false, true})
      for (bool scaled : {false, true}) {
        const std::vector<float> logits = tied_logits(c.T, c.E, seed++);
        const std::vector<float> scale = random_floats(static_cast<size_t>(c.E), seed++, 0.2f, 2.0f);
        Routing want = route_tokens(logits, c.T, c.E, c.k, normalize);
        if (scaled)
          for (size_t i = 0; i < want.weights.size(); ++i) want.weights[i] *= scale[want.experts[i]];
        DeviceBuffer<float> dl(logits), ds(scale), dw(static_cast<size_t>(c.T * c.k));
        DeviceBuffer<int32_t> de(static_cast<size_t>(c.T * c.k));
        moe_route(dl.get(), c.T, c.E, c.k, normalize, scaled ? ds.get() : nullptr, de.get(),
                  dw.get());
        expect_same_routing(want, de.to_host(), dw.to_host(),
                            "T " + std::to_string(c.T) + " E " + std::to_string(c.E) + " k " +
                                std::to_string(c.k) + (normalize ? " normalised" : "") +
                                (scaled ? " scaled" : ""));
      }
}

// moe_route_group (one launch for a step's few tokens, else the two) gives moe_route's experts
// and weights and moe_group's tables: tied, NaN and infinite logits, the one-block sizes and past
// them (T 65, E 512: the two launches).
TEST_F(CudaTest, FusedRouteGroupIsRouteThenGroup) {
  struct Case {
    int64_t T, E, k;
  };
  const Case cases[] = {{1, 128, 8}, {5, 64, 8}, {17, 300, 4}, {64, 128, 8}, {65, 128, 8},
                        {8, 512, 10}, {1, 8, 2}};
  uint32_t seed = 70;
  for (const Case& c : cases)
    for (bool scaled : {false, true}) {
      const std::vector<float> logits = tied_logits(c.T, c.E, seed++);
      const std::vector<float> scale = random_floats(static_cast<size_t>(c.E), seed++, 0.2f, 2.0f);
      const int64_t n = c.T * c.k, gs = moe_groups_size(c.T, c.k, c.E);
      DeviceBuffer<float> dl(logits), ds(scale), w0(n), w1(n);
      DeviceBuffer<int32_t> e0(n), e1(n), s0(n), s1(n), l0(n), l1(n), g0(gs), g1(gs);
      const float* sc = scaled ? ds.get() : nullptr;
      moe_route(dl.get(), c.T, c.E, c.k, true, sc, e0.get(), w0.get());
      moe_group(e0.get(), c.T, c.k, c.E, s0.get(), l0.get(), g0.get());
      moe_route_group(dl.get(), c.T, c.E, c.k, true, sc, e1.get(), w1.get(), s1.get(), l1.get(),
                      g1.get());
      const std::string what = "T " + std::to_string(c.T) + " E " + std::to_string(c.E) + " k " +
                               std::to_string(c.k) + (scaled ? " scaled" : "");
      EXPECT_EQ(e1.to_host(), e0.to_host()) << what;
      const std::vector<float> a = w0.to_host(), b = w1.to_host();
      EXPECT_TRUE(same_bits(a.data(), b.data(), a.size())) << what;
      EXPECT_EQ(s1.to_host(), s0.to_host()) << what;
      EXPECT_EQ(l1.to_host(), l0.to_host()) << what;
      std::vector<int32_t> h0 = g0.to_host(), h1 = g1.to_host();
      h0.resize(1 + 3 * h0[0]);
      h1.resize(1 + 3 * std::max(0, h1[0]));
      EXPECT_EQ(h1, h0) << what;
    }
}

// A decode step's one token takes its own one-warp launch (E up to 512): every row of the tied
// logits (ties, a row all equal, a NaN, an infinity) routed alone gives moe_route then moe_group,
// renormalised or not, scaled or not, with and without the shared expert's group; E past 512 and
// k = 32 (one pick per lane) included.
TEST_F(CudaTest, OneTokenRouteGroupIsRouteThenGroup) {
  struct Case {
    int64_t E, k;
  };
  const Case cases[] = {{8, 2}, {60, 32}, {128, 8}, {256, 8}, {300, 10}, {512, 8}, {513, 8},
                        {33, 1}};
  constexpr int64_t kRows = 18;
  uint32_t seed = 300;
  for (const Case& c : cases) {
    const std::vector<float> all = tied_logits(kRows, c.E, seed++);
    const std::vector<float> scale = random_floats(static_cast<size_t>(c.E), seed++, 0.2f, 2.0f);
    DeviceBuffer<float> ds(scale);
    for (int64_t t = 0; t < kRows; ++t)
      for (int variant = 0; variant < 8; ++variant) {
        const bool normalize = variant & 1, scaled = variant & 2, shared = variant & 4;
        const std::vector<float> row(all.begin() + t * c.E, all.begin() + (t + 1) * c.E);
        const int64_t k = c.k, rows = k + shared, gs = moe_groups_size(1, k, c.E, shared);
        DeviceBuffer<float> dl(row), w0(k), w1(k);
        DeviceBuffer<int32_t> e0(k), e1(k), s0(rows), s1(rows), l0(k), l1(k), g0(gs), g1(gs);
        const float* sc = scaled ? ds.get() : nullptr;
        moe_route(dl.get(), 1, c.E, k, normalize, sc, e0.get(), w0.get());
        moe_group(e0.get(), 1, k, c.E, s0.get(), l0.get(), g0.get(), shared);
        moe_route_group(dl.get(), 1, c.E, k, normalize, sc, e1.get(), w1.get(), s1.get(),
                        l1.get(), g1.get(), shared);
        const std::string what = "E " + std::to_string(c.E) + " k " + std::to_string(k) +
                                 " row " + std::to_string(t) + " variant " +
                                 std::to_string(variant);
        ASSERT_EQ(e1.to_host(), e0.to_host()) << what;
        const std::vector<float> a = w0.to_host(), b = w1.to_host();
        ASSERT_TRUE(same_bits(a.data(), b.data(), a.size())) << what;
        ASSERT_EQ(s1.to_host(), s0.to_host()) << what;
        ASSERT_EQ(l1.to_host(), l0.to_host()) << what;
        std::vector<int32_t> h0 = g0.to_host(), h1 = g1.to_host();
        h0.resize(1 + 3 * h0[0]);
        h1.resize(1 + 3 * std::max(0, std::min(h1[0], static_cast<int32_t>(k + shared))));
        ASSERT_EQ(h1, h0) << what;
      }
  }
}

// A skewed routing of T tokens: expert 0 in every token's list (it takes T rows), the rest from
// a few low ids (experts past 2k + 2 stay empty), ranks shuffled; distinct ids per token.
Routing skewed_routing(int64_t T, int64_t E, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  Routing r;
  r.tokens = T;
  r.k = k;
  const int64_t pool = std::min(E, 2 * k + 2);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> ids(static_cast<size_t>(pool));
    for (int64_t i = 0; i < pool; ++i) ids[i] = static_cast<int32_t>(i);
    std::shuffle(ids.begin() + 1, ids.end(), rng);
    ids.resize(static_cast<size_t>(k));
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int32_t e : ids) {
      r.experts.push_back(e);
      r.weights.push_back(0.1f);
    }
  }
  return r;
}

TEST_F(CudaTest, DeviceGroupingIsHostGrouping) {
  uint32_t seed = 40;
  for (int64_t T : {1, 3, 8, 64, 300})
    for (int64_t E : {16, 128, 512}) {
      const int64_t k = 8;
      const Routing r = skewed_routing(T, E, k, seed++);
      const ExpertGroups g = lockstep::group_by_expert(r, E);
      DeviceBuffer<int32_t> de(r.experts), src(T * k), slot(T * k),
          groups(static_cast<size_t>(moe_groups_size(T, k, E)));
      moe_group(de.get(), T, k, E, src.get(), slot.get(), groups.get());
      const std::string what = "T " + std::to_string(T) + " E " + std::to_string(E);
      EXPECT_EQ(src.to_host(), g.source) << what;
      EXPECT_EQ(slot.to_host(), g.slot) << what;
      std::vector<int32_t> want = {0};
      for (int64_t e = 0; e < E; ++e)
        if (g.count[e] > 0) {
          ++want[0];
          want.insert(want.end(), {static_cast<int32_t>(e), static_cast<int32_t>(g.first[e]),
                                   static_cast<int32_t>(g.count[e])});
        }
      std::vector<int32_t> got = groups.to_host();
      got.resize(want.size());
      EXPECT_EQ(got, want) << what;
    }
}

// E experts' weights of one projection shape on the device: BF16 (bits 0) or 4/8-bit quantized.
struct DeviceExperts {
  std::vector<DeviceBf16> bf16;
  std::vector<DeviceQuant> quant;
  std::vector<HostQuant> host;  // the quantized sources
  std::vector<Weight> w;
};
DeviceExperts make_experts(int64_t E, int64_t N, int64_t K, int bits, uint32_t seed) {
  DeviceExperts d;
  for (int64_t e = 0; e < E; ++e) {
    if (bits == 0) {
      d.bf16.push_back(bf16_on_device(random_bf16(static_cast<size_t>(N * K), seed + e), N, K));
    } else {
      d.host.push_back(random_quant(N, K, bits, 64, DType::BF16, seed + static_cast<uint32_t>(e)));
      d.quant.push_back(to_device(d.host.back().w));
    }
  }
  for (int64_t e = 0; e < E; ++e) d.w.push_back(bits == 0 ? d.bf16[e].w : d.quant[e].w);
  return d;
}

TEST_F(CudaTest, GroupedExpertLinearIsPerExpertLinearBitwise) {
  struct Shape {
    int64_t N, K;
  };
  // qwen3-30b-a3b gate/up and down, qwen3.5-35b-a3b's, and an S = 1 shape (16k rows).
  const Shape shapes[] = {{768, 2048}, {2048, 768}, {512, 2048}, {2048, 512}, {16384, 256}};
  const int64_t E = 24, k = 4;
  uint32_t seed = 100;
  for (const Shape& sh : shapes)
    for (int bits : {0, 4, 8}) {
      if (sh.N == 16384 && bits != 0) continue;  // one S = 1 case is enough
      DeviceExperts ex = make_experts(E, sh.N, sh.K, bits, seed);
      seed += 100;
      // Two projections (as gate and up): expert e's at 2 e and 2 e + 1 (the second is expert
      // (e + 1) % E's weight, so the two differ).
      std::vector<const Weight*> table;
      for (int64_t e = 0; e < E; ++e) {
        table.push_back(&ex.w[e]);
        table.push_back(&ex.w[(e + 1) % E]);
      }
      if (!linear_experts_supported(ex.w[0])) {
        ADD_FAILURE() << "linear_experts does not take " << sh.N << "x" << sh.K << " at " << bits
                      << " bits";
        continue;
      }
      ExpertTable t = make_expert_table(table, 2);
      for (int64_t T : {1, 3, 8, 64, 300, 1000}) {
        const Routing r = skewed_routing(T, E, k, seed++);
        const ExpertGroups g = lockstep::group_by_expert(r, E);
        const int64_t n = T * k;
        DeviceBuffer<int32_t> de(r.experts), src(n), slot(n),
            groups(static_cast<size_t>(moe_groups_size(T, k, E)));
        moe_group(de.get(), T, k, E, src.get(), slot.get(), groups.get());
        DeviceBuffer<float> x(random_floats(static_cast<size_t>(n * sh.K), seed++));
        DeviceBuffer<float> y0(std::vector<float>(n * sh.N, NAN)), y1(std::vector<float>(n * sh.N, NAN));
        DeviceBuffer<float> r0(std::vector<float>(n * sh.N, NAN)), r1(std::vector<float>(n * sh.N, NAN));
        float* ys[2] = {y0.get(), y1.get()};
        linear_experts(t, x.get(), nullptr, ys, groups.get(), T, n);
        // The same call reading the tokens through moe_group's source (no gathered copy) gives
        // the bits of the gathered rows: xg = gather_rows(tokens, source).
        DeviceBuffer<float> tokens(random_floats(static_cast<size_t>(T * sh.K), seed++)),
            xg(static_cast<size_t>(n * sh.K));
        gather_rows(tokens.get(), src.get(), n, sh.K, xg.get());
        DeviceBuffer<float> v0(std::vector<float>(n * sh.N, NAN)), v1(std::vector<float>(n * sh.N, NAN));
        DeviceBuffer<float> w0(std::vector<float>(n * sh.N, NAN)), w1(std::vector<float>(n * sh.N, NAN));
        float* vs[2] = {v0.get(), v1.get()};
        float* ws[2] = {w0.get(), w1.get()};
        linear_experts(t, tokens.get(), src.get(), vs, groups.get(), T, n);
        linear_experts(t, xg.get(), nullptr, ws, groups.get(), T, n);
        for (int64_t e = 0; e < E; ++e) {
          if (g.count[e] == 0) continue;
          const float* xe = x.get() + g.first[e] * sh.K;
          linear(xe, g.count[e], ex.w[e], nullptr, r0.get() + g.first[e] * sh.N);
          linear(xe, g.count[e], ex.w[(e + 1) % E], nullptr, r1.get() + g.first[e] * sh.N);
        }
        const std::vector<float> a0 = y0.to_host(), b0 = r0.to_host(), a1 = y1.to_host(),
                                 b1 = r1.to_host();
        const std::string what = std::to_string(sh.N) + "x" + std::to_string(sh.K) + " bits " +
                                 std::to_string(bits) + " T " + std::to_string(T);
        EXPECT_TRUE(same_bits(a0.data(), b0.data(), a0.size()))
            << what << " projection 0: " << diff_summary(a0.data(), b0.data(), a0.size());
        EXPECT_TRUE(same_bits(a1.data(), b1.data(), a1.size()))
            << what << " projection 1: " << diff_summary(a1.data(), b1.data(), a1.size());
        const std::vector<float> c0 = v0.to_host(), d0 = w0.to_host(), c1 = v1.to_host(),
                                 d1 = w1.to_host();
        EXPECT_TRUE(same_bits(c0.data(), d0.data(), c0.size()))
            << what << " x through source, projection 0: " << diff_summary(c0.data(), d0.data(), c0.size());
        EXPECT_TRUE(same_bits(c1.data(), d1.data(), c1.size()))
            << what << " x through source, projection 1: " << diff_summary(c1.data(), d1.data(), c1.size());
        // The launch choices the rules leave free give the default launch's bits: every decode
        // config (BF16, at most 8 tokens) and the 64 KiB tile of small-memory devices (BF16,
        // the tiled launch past 64 rows an expert).
        auto same_as_default = [&](const std::string& choice) {
          DeviceBuffer<float> u0(std::vector<float>(n * sh.N, NAN)),
              u1(std::vector<float>(n * sh.N, NAN));
          float* us[2] = {u0.get(), u1.get()};
          linear_experts(t, tokens.get(), src.get(), us, groups.get(), T, n);
          const std::vector<float> e0 = u0.to_host(), e1 = u1.to_host();
          EXPECT_TRUE(same_bits(e0.data(), c0.data(), e0.size()))
              << what << " " << choice << ", projection 0: " << diff_summary(e0.data(), c0.data(), e0.size());
          EXPECT_TRUE(same_bits(e1.data(), c1.data(), e1.size()))
              << what << " " << choice << ", projection 1: " << diff_summary(e1.data(), c1.data(), e1.size());
        };
        if (bits == 0 && T <= 8) {
          const int configs = testing::set_expert_decode_config(0);
          for (int c = 0; c < configs; ++c) {
            testing::set_expert_decode_config(c);
            same_as_default("decode config " + std::to_string(c));
          }
          testing::set_expert_decode_config(-1);
        }
        if (T > 8 && T <= 64) {  // batched decode, verify: both token tiles
          for (int rows : {8, 16}) {
            testing::set_expert_batch_tile_rows(rows);
            same_as_default(std::to_string(rows) + "-row token tiles");
          }
          testing::set_expert_batch_tile_rows(0);
        }
        if (bits == 0 && T > 64) {  // a bound past 64 rows an expert: the tiled launch
          testing::set_linear_tile_override(3);
          same_as_default("64 KiB tile");
          testing::set_linear_tile_override(0);
        }
      }
      free_expert_table(t);
    }
}

// Host BF16 expert weights (kept alive: the backend places views of them).
struct HostExperts {
  std::vector<std::vector<uint16_t>> data;
  std::vector<ExpertWeights> host;
};
Weight host_bf16(std::vector<std::vector<uint16_t>>& store, int64_t N, int64_t K, uint32_t seed) {
  store.push_back(random_bf16(static_cast<size_t>(N * K), seed));
  return bf16_weight(store.back().data(), N, K);
}

// E random experts (gate and up [I][H], down [H][I]) placed on a backend: BF16 (bits 0) or 4/8-bit
// (group 64); the host sources stay alive with it (the backend places views of them).
struct PlacedExperts {
  std::vector<std::vector<uint16_t>> store;
  std::vector<HostQuant> qstore;
  std::vector<ExpertWeights> experts;
  PlacedExperts(Backend& be, int bits, int64_t E, int64_t H, int64_t I, uint32_t& seed) {
    store.reserve(3 * E + 1);  // views into the elements: no reallocation
    qstore.reserve(3 * E);
    auto make = [&](int64_t N, int64_t K) {
      if (bits == 0) return be.place(host_bf16(store, N, K, seed++));
      qstore.push_back(random_quant(N, K, bits, 64, DType::BF16, seed++));
      return be.place(qstore.back().w);
    };
    for (int64_t e = 0; e < E; ++e) {
      ExpertWeights x;
      x.gate = make(I, H);
      x.up = make(I, H);
      x.down = make(H, I);
      experts.push_back(x);
    }
  }
};

// One MoE layer (E experts, k per token, shared expert as a given [T][H] row block and gate)
// through the host-routed path and the device path, on the same backend and inputs.
TEST_F(CudaTest, MoeLayerDevicePathIsHostPathBitwiseEagerAndReplayed) {
  for (int bits : {0, 4}) {
    const int64_t E = 64, k = 8, H = 1024, I = 512;
    auto be = make_cuda_backend();
    uint32_t seed = 500 + bits;
    PlacedExperts placed(*be, bits, E, H, I, seed);
    const std::vector<ExpertWeights>& experts = placed.experts;
    const Weight router = be->place(host_bf16(placed.store, E, H, seed++));
    const ExpertSet set = lockstep::expert_set(experts, *be);
    ASSERT_TRUE(set.on_device) << "bits " << bits;
    for (int64_t T : {1, 3, 8, 32, 64}) {
      // Host path, eagerly, for 4 different inputs.
      std::vector<std::vector<float>> want;
      std::vector<std::vector<float>> inputs, shared_in, gate_in;
      for (int round = 0; round < 4; ++round) {
        inputs.push_back(random_floats(static_cast<size_t>(T * H), seed++));
        shared_in.push_back(random_floats(static_cast<size_t>(T * H), seed++));
        gate_in.push_back(random_floats(static_cast<size_t>(T), seed++, -3.0f, 3.0f));
        Floats h = be->upload(inputs.back()), sh = be->upload(shared_in.back()),
               sg = be->upload(gate_in.back());
        Floats logits = be->array<float>(T * E), out = be->array<float>(T * H);
        be->linear(h.data(), T, router, nullptr, logits.data());
        const Routing r = lockstep::route_tokens(be->download(logits.data(), T * E), T, E, k, true);
        lockstep::routed_experts_forward(experts, false, h.data(), T, r, sh.data(), sg.data(),
                                         out.data(), *be);
        want.push_back(be->download(out.data(), T * H));
      }
      // Device path: eagerly, then inside a recorded step (first eager, then recorded, then
      // replayed) with new inputs each time, so the replays route differently.
      for (int round = 0; round < 4; ++round) {
        const std::string key = round == 0 ? "" : "moe-test|" + std::to_string(T);
        be->begin_step(key);
        Floats h = be->upload(inputs[round]), sh = be->upload(shared_in[round]),
               sg = be->upload(gate_in[round]);
        Floats logits = be->array<float>(T * E), out = be->array<float>(T * H);
        be->linear(h.data(), T, router, nullptr, logits.data());
        const lockstep::DeviceRouting r =
            lockstep::route_on_device(logits.data(), T, E, k, true, nullptr, *be);
        lockstep::routed_experts_forward_device(set, false, h.data(), r, sh.data(), sg.data(),
                                                out.data(), *be);
        const std::vector<float> got = be->download(out.data(), T * H);
        be->end_step(true);
        EXPECT_TRUE(same_bits(got.data(), want[round].data(), got.size()))
            << "bits " << bits << " T " << T << " round " << round << ": "
            << diff_summary(got.data(), want[round].data(), got.size());
      }
    }
  }
}

// Calls past kMoeDeviceMaxTokens (prefill chunks) route on the host; on this backend their
// experts still run as grouped launches (upload_routing's tables, launches sized by the real most
// rows per expert): bitwise the per-expert linear() path, BF16 and 4/8-bit, for router-like and
// skewed routings (one expert taking every token), silu and gelu_tanh, with and without a shared
// expert. The uploaded table is moe_group's, and max_rows the largest group.
TEST_F(CudaTest, HostRoutedCallsRunTheGroupedLaunchesBitwise) {
  for (int bits : {0, 4, 8}) {
    const int64_t E = 48, k = 8, H = 512, I = 256;
    auto be = make_cuda_backend();
    uint32_t seed = 900 + bits;
    PlacedExperts placed(*be, bits, E, H, I, seed);
    const std::vector<ExpertWeights>& experts = placed.experts;
    const ExpertSet set = lockstep::expert_set(experts, *be);
    ASSERT_TRUE(set.on_device) << "bits " << bits;
    for (int64_t T : {65, 300, 500})
      for (bool skewed : {false, true}) {
        const std::string what = "bits " + std::to_string(bits) + " T " + std::to_string(T) +
                                 (skewed ? " skewed" : " router");
        const Routing r = skewed ? skewed_routing(T, E, k, seed++)
                                 : lockstep::route_tokens(random_floats(T * E, seed++, -4.0f, 4.0f),
                                                          T, E, k, true);
        if (!skewed) {  // the backend's routing read back is route_tokens' (prefill calls use it)
          const std::vector<float> logits = random_floats(T * E, seed++, -4.0f, 4.0f);
          const Routing want = lockstep::route_tokens(logits, T, E, k, true);
          Floats dl = be->upload(logits);
          const Routing got = lockstep::route_on_backend(dl.data(), T, E, k, true, nullptr, *be);
          expect_same_routing(want, got.experts, got.weights, what + " route_on_backend");
        }
        const lockstep::DeviceRouting d = lockstep::upload_routing(r, E, *be);
        const ExpertGroups g = lockstep::group_by_expert(r, E);
        EXPECT_EQ(d.max_rows, *std::max_element(g.count.begin(), g.count.end())) << what;
        DeviceBuffer<int32_t> de(r.experts), src(T * k), slot(T * k),
            groups(static_cast<size_t>(moe_groups_size(T, k, E)));
        moe_group(de.get(), T, k, E, src.get(), slot.get(), groups.get());
        std::vector<int32_t> want_groups = groups.to_host(),
                             got_groups = be->download(d.groups.data(), d.groups.size());
        want_groups.resize(1 + 3 * want_groups[0]);
        EXPECT_EQ(got_groups, want_groups) << what;
        EXPECT_EQ(be->download(d.source.data(), T * k), src.to_host()) << what;
        EXPECT_EQ(be->download(d.slot.data(), T * k), slot.to_host()) << what;
        for (bool gelu : {false, true})
          for (bool with_shared : {false, true}) {
            Floats h = be->upload(random_floats(static_cast<size_t>(T * H), seed++)),
                   sh = be->upload(random_floats(static_cast<size_t>(T * H), seed++)),
                   sg = be->upload(random_floats(static_cast<size_t>(T), seed++, -3.0f, 3.0f));
            const float* shp = with_shared ? sh.data() : nullptr;
            const float* sgp = with_shared ? sg.data() : nullptr;
            Floats want = be->array<float>(T * H), got = be->array<float>(T * H);
            lockstep::routed_experts_forward(experts, gelu, h.data(), T, r, shp, sgp, want.data(),
                                             *be);
            lockstep::routed_experts_forward_host_routed(set, experts, gelu, h.data(), T, r, shp,
                                                         sgp, got.data(), *be);
            const std::vector<float> a = be->download(got.data(), T * H),
                                     b = be->download(want.data(), T * H);
            EXPECT_TRUE(same_bits(a.data(), b.data(), a.size()))
                << what << (gelu ? " gelu_tanh" : " silu") << (with_shared ? " shared" : "")
                << ": " << diff_summary(a.data(), b.data(), a.size());
          }
      }
  }
}

// A shared expert of the routed experts' shape runs inside their grouped launches (ExpertSet
// holds_shared; moe_group's shared group): the layer's output is bitwise the one where it runs as
// its own MLP (linear_multi gate/up, SiLU-up, down) and is added by moe_combine, on the device
// path (1-64 tokens) and the host-routed one (BF16 past 64 tokens; quantized ones keep it
// separate there), and the device tables are the uploaded host grouping plus (E, T k, T).
TEST_F(CudaTest, SharedExpertInTheGroupedLaunchesIsItsOwnMlpBitwise) {
  for (int bits : {0, 4}) {
    const int64_t E = 32, k = 4, H = 512, I = 256;
    auto be = make_cuda_backend();
    uint32_t seed = 1300 + bits;
    PlacedExperts placed(*be, bits, E + 1, H, I, seed);  // the last one is the shared expert
    const std::span<const ExpertWeights> experts(placed.experts.data(), E);
    lockstep::MlpWeights shared;
    shared.gate = placed.experts[E].gate;
    shared.up = placed.experts[E].up;
    shared.down = placed.experts[E].down;
    std::vector<std::vector<uint16_t>> store;
    store.reserve(2);
    const Weight router = be->place(host_bf16(store, E, H, seed++));
    const Weight shared_gate = be->place(host_bf16(store, 1, H, seed++));
    const ExpertSet plain = lockstep::expert_set(experts, *be);
    const ExpertSet with = lockstep::expert_set(experts, *be, &shared);
    ASSERT_TRUE(with.holds_shared && !plain.holds_shared) << "bits " << bits;
    for (int64_t T : {1, 3, 8, 64, 65, 200}) {
      const std::string what = "bits " + std::to_string(bits) + " T " + std::to_string(T);
      const bool in_groups = lockstep::shared_in_groups(with, T);
      EXPECT_EQ(in_groups, T <= kMoeDeviceMaxTokens || bits == 0) << what;
      Floats h = be->upload(random_floats(static_cast<size_t>(T * H), seed++));
      Floats logits = be->array<float>(T * E), sg = be->array<float>(T),
             sh = be->array<float>(T * H), want = be->array<float>(T * H),
             got = be->array<float>(T * H);
      be->linear(h.data(), T, router, nullptr, logits.data());
      be->linear(h.data(), T, shared_gate, nullptr, sg.data());
      lockstep::mlp_forward(shared, h.data(), T, sh.data(), *be);
      if (T <= kMoeDeviceMaxTokens) {
        const lockstep::DeviceRouting a =
            lockstep::route_on_device(logits.data(), T, E, k, true, nullptr, *be);
        const lockstep::DeviceRouting b =
            lockstep::route_on_device(logits.data(), T, E, k, true, nullptr, *be, true);
        EXPECT_TRUE(b.shared && !a.shared) << what;
        lockstep::routed_experts_forward_device(plain, false, h.data(), a, sh.data(), sg.data(),
                                                want.data(), *be);
        lockstep::routed_experts_forward_device(with, false, h.data(), b, nullptr, sg.data(),
                                                got.data(), *be);
        // The device's shared tables are the host grouping's with the shared group appended.
        const Routing r = lockstep::route_tokens(be->download(logits.data(), T * E), T, E, k, true);
        const lockstep::DeviceRouting u = lockstep::upload_routing(r, E, *be, true);
        std::vector<int32_t> dev_groups = be->download(b.groups.data(), b.groups.size());
        dev_groups.resize(1 + 3 * dev_groups[0]);
        EXPECT_EQ(dev_groups, be->download(u.groups.data(), u.groups.size())) << what;
        EXPECT_EQ(be->download(b.source.data(), T * k + T),
                  be->download(u.source.data(), T * k + T)) << what;
        EXPECT_EQ(dev_groups[1 + 3 * (dev_groups[0] - 1)], E) << what;
      } else {
        const Routing r = lockstep::route_tokens(be->download(logits.data(), T * E), T, E, k, true);
        lockstep::routed_experts_forward_host_routed(plain, experts, false, h.data(), T, r,
                                                     sh.data(), sg.data(), want.data(), *be);
        lockstep::routed_experts_forward_host_routed(with, experts, false, h.data(), T, r,
                                                     in_groups ? nullptr : sh.data(), sg.data(),
                                                     got.data(), *be);
      }
      const std::vector<float> a = be->download(got.data(), T * H),
                               b = be->download(want.data(), T * H);
      EXPECT_TRUE(same_bits(a.data(), b.data(), a.size()))
          << what << ": " << diff_summary(a.data(), b.data(), a.size());
    }
  }
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
