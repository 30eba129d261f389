// CUDA Gated DeltaNet (deltanet_step, gated_rms_norm) against the CPU per-token kernels of
// kernels/gated_delta.h, and the invariance rule on the GPU: a sequence's states and outputs are
// bitwise the same however its tokens are split into calls and whatever other sequences share a
// call; replay without outputs gives the same states; the norm done in the recurrence's tail is
// the norm launch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gated_delta.h"
#include "cuda_test_util.h"

namespace lockstep::kernels::cuda::test {
namespace {

// Layer weights and per-sequence data of one test shape (host copies plus device weights).
struct Layer {
  DeltaNetShape s;
  std::vector<float> conv_w, A_log, dt_bias;
  DeviceBuffer<float> d_conv_w, d_A_log, d_dt_bias;

  Layer(DeltaNetShape shape, uint32_t seed) : s(shape) {
    conv_w = random_floats(s.conv_dim() * s.K, seed, -0.6f, 0.6f);
    A_log = random_floats(s.nv, seed + 1, -1.5f, 1.0f);
    dt_bias = random_floats(s.nv, seed + 2, -1.0f, 1.0f);
    d_conv_w = DeviceBuffer<float>(conv_w);
    d_A_log = DeviceBuffer<float>(A_log);
    d_dt_bias = DeviceBuffer<float>(dt_bias);
  }
  int64_t TI() const { return s.token_inputs(); }
  int64_t VD() const { return s.value_dim(); }
  int64_t conv_floats() const { return s.conv_dim() * (s.K - 1); }
  int64_t delta_floats() const { return s.nv * s.dk * s.dv; }
};

struct Seq {
  int64_t n = 0;
  std::vector<float> tokens;  // [n][token_inputs]
  std::vector<float> conv0, delta0;  // initial states
};

Seq make_seq(const Layer& L, int64_t n, uint32_t seed) {
  Seq q;
  q.n = n;
  const int64_t C = L.s.conv_dim(), TI = L.TI(), nv = L.s.nv;
  q.tokens = random_floats(n * TI, seed, -1.0f, 1.0f);
  const auto a = random_floats(n * nv, seed + 1, -6.0f, 22.0f);  // > 20 exercises softplus's cut
  const auto b = random_floats(n * nv, seed + 2, -4.0f, 4.0f);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < nv; ++h) {
      q.tokens[t * TI + C + h] = a[t * nv + h];
      q.tokens[t * TI + C + nv + h] = b[t * nv + h];
    }
  q.conv0 = random_floats(L.conv_floats(), seed + 3, -1.0f, 1.0f);
  q.delta0 = random_floats(L.delta_floats(), seed + 4, -0.5f, 0.5f);
  return q;
}

// The CPU per-token step (models/gated_deltanet_layer.cpp's deltanet_token_prepare + _head).
void cpu_token(const Layer& L, float* conv, float* delta, const float* in, float* core) {
  const DeltaNetShape& s = L.s;
  const int64_t C = s.conv_dim(), KD = s.key_dim();
  std::vector<float> p(C + 2 * s.nv);
  causal_conv1d_step(in, C, s.K, L.conv_w.data(), conv, p.data());
  l2_normalize(p.data(), 2 * s.nk, s.dk, 1e-6f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.dk));
  for (int64_t i = 0; i < KD; ++i) p[i] *= scale;
  delta_gates(in + C, in + C + s.nv, L.A_log.data(), L.dt_bias.data(), s.nv, p.data() + C,
              p.data() + C + s.nv);
  for (int64_t h = 0; h < s.nv; ++h) {
    const int64_t kh = h / (s.nv / s.nk);
    gated_delta_step(delta + h * s.dk * s.dv, s.dk, s.dv, p.data() + kh * s.dk,
                     p.data() + KD + kh * s.dk, p.data() + 2 * KD + h * s.dv, p[C + h],
                     p[C + s.nv + h], core ? core + h * s.dv : nullptr);
  }
}

struct Result {
  std::vector<float> conv, delta, core;  // core [n][value_dim]
};

Result cpu_run(const Layer& L, const Seq& q) {
  Result r{q.conv0, q.delta0, std::vector<float>(q.n * L.VD())};
  for (int64_t t = 0; t < q.n; ++t)
    cpu_token(L, r.conv.data(), r.delta.data(), &q.tokens[t * L.TI()], &r.core[t * L.VD()]);
  return r;
}

// One span of a call: `n` tokens of sequence `seq` starting at its token `start`.
struct Piece {
  int seq;
  int64_t start, n;
};

// One call's inputs: its spans' token rows back to back and a span per piece over the
// sequences' device states; T the call's tokens, max_n its longest span.
struct StagedCall {
  int64_t T = 0, max_n = 0;
  std::vector<float> in;
  std::vector<DeltaNetSpan> spans;
};
StagedCall stage_call(const Layer& L, const std::vector<Seq>& seqs, const std::vector<Piece>& call,
                      std::vector<DeviceBuffer<float>>& conv,
                      std::vector<DeviceBuffer<float>>& delta) {
  const int64_t TI = L.TI();
  StagedCall c;
  for (const Piece& p : call) c.T += p.n, c.max_n = std::max(c.max_n, p.n);
  c.in.resize(c.T * TI);
  int64_t row = 0;
  for (const Piece& p : call) {
    const Seq& q = seqs[p.seq];
    std::copy(q.tokens.begin() + p.start * TI, q.tokens.begin() + (p.start + p.n) * TI,
              c.in.begin() + row * TI);
    c.spans.push_back({conv[p.seq].get(), delta[p.seq].get(), static_cast<int32_t>(row),
                       static_cast<int32_t>(p.n)});
    row += p.n;
  }
  return c;
}

// Runs the calls on the GPU from the sequences' initial states; returns each sequence's final
// states and the core rows it received (NaN where a token never produced one).
std::vector<Result> gpu_run(const Layer& L, const std::vector<Seq>& seqs,
                            const std::vector<std::vector<Piece>>& calls, bool with_core,
                            int64_t extra_max = 0) {
  const int64_t VD = L.VD();
  std::vector<DeviceBuffer<float>> conv, delta;
  std::vector<Result> out(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    conv.emplace_back(seqs[i].conv0);
    delta.emplace_back(seqs[i].delta0);
    out[i].core.assign(seqs[i].n * VD, std::numeric_limits<float>::quiet_NaN());
  }
  for (const auto& call : calls) {
    const StagedCall c = stage_call(L, seqs, call, conv, delta);
    const int64_t T = c.T, max_n = c.max_n;
    const std::vector<DeltaNetSpan>& spans = c.spans;
    DeviceBuffer<float> din(c.in);
    DeviceBuffer<DeltaNetSpan> dspans(spans);
    DeviceBuffer<float> dcore(T * VD);
    deltanet_step(L.s, L.d_conv_w.get(), L.d_A_log.get(), L.d_dt_bias.get(), din.get(), T,
                  dspans.get(), static_cast<int64_t>(spans.size()), max_n + extra_max,
                  with_core ? dcore.get() : nullptr);
    if (with_core) {
      const auto core = dcore.to_host();
      int64_t row = 0;
      for (const Piece& p : call) {
        std::copy(core.begin() + row * VD, core.begin() + (row + p.n) * VD,
                  out[p.seq].core.begin() + p.start * VD);
        row += p.n;
      }
    }
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    out[i].conv = conv[i].to_host();
    out[i].delta = delta[i].to_host();
  }
  return out;
}

// |gpu - cpu| <= rel * (|cpu| + rms(cpu)) element-wise; prints how many are bitwise equal.
void expect_close(const std::vector<float>& gpu, const std::vector<float>& cpu, double rel,
                  const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  double ss = 0;
  for (float c : cpu) ss += double(c) * c;
  const double rms = cpu.empty() ? 0.0 : std::sqrt(ss / cpu.size());
  size_t bad = 0, exact = 0;
  double worst = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (gpu[i] == cpu[i]) ++exact;
    const double err = std::fabs(double(gpu[i]) - cpu[i]);
    worst = std::max(worst, err / (std::fabs(double(cpu[i])) + rms));
    if (!(err <= rel * (std::fabs(double(cpu[i])) + rms))) {
      if (bad++ < 5) ADD_FAILURE() << what << "[" << i << "]: GPU " << gpu[i] << " CPU " << cpu[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what;
  std::printf("  %s: %zu of %zu bitwise equal to the CPU, worst scaled error %.3g\n", what.c_str(),
              exact, gpu.size(), worst);
}

std::string name(const DeltaNetShape& s) {
  return "nk=" + std::to_string(s.nk) + " nv=" + std::to_string(s.nv) + " dk=" +
         std::to_string(s.dk) + " dv=" + std::to_string(s.dv) + " K=" + std::to_string(s.K);
}

const std::vector<DeltaNetShape>& shapes() {
  static const std::vector<DeltaNetShape> v = {
      {16, 16, 128, 128, 4},  // Qwen3.5-0.8B
      {2, 4, 16, 16, 4},      // tiny test model
      {1, 2, 20, 24, 3},      // dk padded to 32 lanes, dv a partial column tile
      {2, 6, 48, 40, 2},      // 3 value heads per key head
      {1, 1, 64, 16, 1},      // no conv state
  };
  return v;
}

TEST_F(CudaTest, DeltaNetMatchesCpu) {
  uint32_t seed = 100;
  for (const DeltaNetShape& s : shapes()) {
    SCOPED_TRACE(name(s));
    const Layer L(s, seed);
    std::vector<Seq> seqs = {make_seq(L, 40, seed + 10), make_seq(L, 9, seed + 20)};
    seed += 100;
    // Both sequences in each call, the first split 13 + 27, the second 4 + 5.
    const auto gpu = gpu_run(L, seqs, {{{0, 0, 13}, {1, 0, 4}}, {{1, 4, 5}, {0, 13, 27}}}, true);
    for (int i = 0; i < 2; ++i) {
      const Result cpu = cpu_run(L, seqs[i]);
      const std::string tag = name(s) + " seq " + std::to_string(i);
      // The conv state is a copy of inputs: exact.
      EXPECT_TRUE(same_bits(gpu[i].conv.data(), cpu.conv.data(), cpu.conv.size())) << tag;
      expect_close(gpu[i].core, cpu.core, 1e-5, tag + " core");
      expect_close(gpu[i].delta, cpu.delta, 1e-5, tag + " delta state");
    }
  }
}

TEST_F(CudaTest, DeltaNetInvariantToSplitsAndOtherSpans) {
  uint32_t seed = 900;
  for (const DeltaNetShape& s : shapes()) {
    SCOPED_TRACE(name(s));
    const Layer L(s, seed);
    const std::vector<Seq> seqs = {make_seq(L, 40, seed + 1), make_seq(L, 20, seed + 2),
                                   make_seq(L, 7, seed + 3)};
    seed += 10;
    const auto ref = gpu_run(L, seqs, {{{0, 0, 40}}}, true);
    for (float x : ref[0].core) ASSERT_FALSE(std::isnan(x)) << "a core row was not written";

    auto expect_same = [&](const Result& a, const Result& b, bool core, const std::string& what) {
      EXPECT_TRUE(same_bits(a.conv.data(), b.conv.data(), a.conv.size())) << what << ": conv state";
      EXPECT_TRUE(same_bits(a.delta.data(), b.delta.data(), a.delta.size()))
          << what << ": delta state";
      if (core) {
        EXPECT_TRUE(same_bits(a.core.data(), b.core.data(), a.core.size())) << what << ": core";
      }
    };

    std::vector<std::vector<Piece>> ones;
    for (int64_t t = 0; t < 40; ++t) ones.push_back({{0, t, 1}});
    expect_same(gpu_run(L, seqs, ones, true)[0], ref[0], true, "40 calls of 1");
    const std::vector<std::vector<Piece>> split = {{{0, 0, 7}}, {{0, 7, 1}}, {{0, 8, 32}}};
    expect_same(gpu_run(L, seqs, split, true)[0], ref[0], true, "7 + 1 + 32");

    // Other sequences in the same calls, before and after ours.
    const auto mixed = gpu_run(L, seqs,
                               {{{1, 0, 5}, {0, 0, 7}, {2, 0, 3}},
                                {{0, 7, 1}, {1, 5, 2}},
                                {{2, 3, 4}, {0, 8, 32}, {1, 7, 13}}},
                               true);
    expect_same(mixed[0], ref[0], true, "7 + 1 + 32 among other spans");
    // A larger launch bound than needed, all three sequences whole in one call.
    const auto whole = gpu_run(L, seqs, {{{2, 0, 7}, {0, 0, 40}, {1, 0, 20}}}, true, 25);
    expect_same(whole[0], ref[0], true, "one call of three sequences");
    expect_same(whole[1], mixed[1], true, "other sequence, whole vs split");
    expect_same(whole[2], mixed[2], true, "third sequence, whole vs split");

    // Rollback replay: no outputs, same states.
    expect_same(gpu_run(L, seqs, {{{0, 0, 40}}}, false)[0], ref[0], false, "replay, one call");
    expect_same(gpu_run(L, seqs, split, false)[0], ref[0], false, "replay, 7 + 1 + 32");
  }
}

TEST_F(CudaTest, GatedRmsNormMatchesCpuAndRows) {
  for (int64_t D : {128, 16, 40}) {
    SCOPED_TRACE("D=" + std::to_string(D));
    const int64_t P = 300;
    const auto x = random_floats(P * D, 31, -3.0f, 3.0f);
    const auto z = random_floats(P * D, 32, -8.0f, 8.0f);
    const auto w = random_floats(D, 33, 0.5f, 1.5f);
    DeviceBuffer<float> dx(x), dz(z), dw(w), dref(P * D);
    for (int64_t r = 0; r < P; ++r)
      gated_rms_norm(dx.get() + r * D, dz.get() + r * D, 1, D, dw.get(), 1e-6f,
                     dref.get() + r * D);
    const auto ref = dref.to_host();
    for (int64_t M : {2, 5, 64, 299}) {
      const int64_t start = (M * 7) % (P - M + 1);
      DeviceBuffer<float> dy(M * D);
      gated_rms_norm(dx.get() + start * D, dz.get() + start * D, M, D, dw.get(), 1e-6f, dy.get());
      ASSERT_TRUE(same_bits(dy.to_host().data(), ref.data() + start * D, M * D)) << "M=" << M;
    }
    DeviceBuffer<float> dip(x);
    gated_rms_norm(dip.get(), dz.get(), P, D, dw.get(), 1e-6f, dip.get());
    ASSERT_TRUE(same_bits(dip.to_host().data(), ref.data(), P * D)) << "in place";
    std::vector<float> cpu(P * D);
    kernels::gated_rms_norm(x.data(), z.data(), P, D, w.data(), 1e-6f, cpu.data());
    expect_close(ref, cpu, 1e-6, "gated_rms_norm D=" + std::to_string(D));
  }
}

// deltanet_step with its norm (a decode step's call: the recurrence's last column tile of each
// head normalises the head's rows) gives deltanet_step then gated_rms_norm bit for bit: spans of
// one token (three sequences a call, 40 calls: the counters come back to zero), verify-sized
// spans of 3 to 8 tokens, and a 40-token call (the norm launch), every test shape.
TEST_F(CudaTest, DeltaNetNormInTheRecurrenceIsTheNormLaunchBitwise) {
  uint32_t seed = 4000;
  for (const DeltaNetShape& s : shapes()) {
    SCOPED_TRACE(name(s));
    const Layer L(s, seed);
    const std::vector<Seq> seqs = {make_seq(L, 40, seed + 1), make_seq(L, 40, seed + 2),
                                   make_seq(L, 40, seed + 3)};
    const std::vector<float> w = random_floats(s.dv, seed + 4, 0.5f, 1.5f);
    seed += 10;
    DeviceBuffer<float> dw(w);
    const int64_t VD = L.VD();
    // Both forms over the same calls from the same initial states: every call's normalised core
    // rows in call order, then the final states.
    auto run = [&](const std::vector<std::vector<Piece>>& calls, bool fused) {
      std::vector<DeviceBuffer<float>> conv, delta;
      for (const Seq& q : seqs) conv.emplace_back(q.conv0), delta.emplace_back(q.delta0);
      std::vector<float> all;
      uint32_t zseed = 77;
      for (const auto& call : calls) {
        const StagedCall c = stage_call(L, seqs, call, conv, delta);
        const int64_t T = c.T, max_n = c.max_n;
        DeviceBuffer<float> din(c.in), dz(random_floats(T * VD, zseed++, -6.0f, 6.0f)),
            dcore(std::vector<float>(T * VD, NAN));
        DeviceBuffer<DeltaNetSpan> dspans(c.spans);
        const int64_t n_spans = static_cast<int64_t>(c.spans.size());
        if (fused) {
          const DeltaNetNorm norm{dz.get(), dw.get(), 1e-6f};
          deltanet_step(L.s, L.d_conv_w.get(), L.d_A_log.get(), L.d_dt_bias.get(), din.get(), T,
                        dspans.get(), n_spans, max_n, dcore.get(), &norm);
        } else {
          deltanet_step(L.s, L.d_conv_w.get(), L.d_A_log.get(), L.d_dt_bias.get(), din.get(), T,
                        dspans.get(), n_spans, max_n, dcore.get());
          gated_rms_norm(dcore.get(), dz.get(), T * s.nv, s.dv, dw.get(), 1e-6f, dcore.get());
        }
        const std::vector<float> core = dcore.to_host();
        all.insert(all.end(), core.begin(), core.end());
      }
      for (size_t i = 0; i < seqs.size(); ++i) {
        const std::vector<float> c = conv[i].to_host(), d = delta[i].to_host();
        all.insert(all.end(), c.begin(), c.end());
        all.insert(all.end(), d.begin(), d.end());
      }
      return all;
    };
    std::vector<std::vector<Piece>> ones, verify;
    for (int64_t t = 0; t < 40; ++t) ones.push_back({{0, t, 1}, {1, t, 1}, {2, t, 1}});
    for (int64_t t = 0; t + 8 <= 40; t += 8) verify.push_back({{0, t, 8}, {1, t, 3}, {2, t, 5}});
    const std::vector<std::vector<Piece>> whole = {{{0, 0, 40}, {1, 0, 2}}};
    for (const auto& [what, calls] : {std::pair{"one token a span", ones},
                                      std::pair{"verify-sized spans", verify},
                                      std::pair{"a 40-token span", whole}}) {
      const std::vector<float> a = run(calls, true), b = run(calls, false);
      ASSERT_EQ(a.size(), b.size()) << what;
      for (float x : a) ASSERT_FALSE(std::isnan(x)) << what << ": a row was not written";
      ASSERT_TRUE(same_bits(a.data(), b.data(), a.size())) << what;
    }
  }
}

// deltanet_regroup (one launch) puts every element of Qwen3-Next's fused projections where the
// layer reads it: q, k, v of key head g's group into inputs' q | k | v blocks, its z into z, its
// b and a into inputs' a | b blocks (Backend::deltanet_regroup's layout, written out here from
// the group definition, not from the kernel's index arithmetic).
TEST_F(CudaTest, DeltaNetRegroupPlacesEveryElement) {
  for (const DeltaNetShape s : {DeltaNetShape{2, 4, 8, 6, 4}, DeltaNetShape{16, 32, 128, 128, 4},
                                DeltaNetShape{3, 3, 5, 7, 2}}) {
    for (const int64_t T : {1, 5}) {
      SCOPED_TRACE("nk=" + std::to_string(s.nk) + " nv=" + std::to_string(s.nv) +
                   " T=" + std::to_string(T));
      const int64_t r = s.nv / s.nk, grp = 2 * s.dk + 2 * r * s.dv, QZ = s.nk * grp;
      const int64_t TI = s.token_inputs(), VD = s.value_dim(), KD = s.key_dim();
      const auto qkvz = random_floats(T * QZ, 41), ba = random_floats(T * 2 * s.nv, 42);
      std::vector<float> want_in(T * TI, NAN), want_z(T * VD, NAN);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t g = 0; g < s.nk; ++g) {
          const float* grp_in = qkvz.data() + t * QZ + g * grp;
          float* in = want_in.data() + t * TI;
          for (int64_t i = 0; i < s.dk; ++i) {
            in[g * s.dk + i] = grp_in[i];                // q
            in[KD + g * s.dk + i] = grp_in[s.dk + i];    // k
          }
          for (int64_t i = 0; i < r * s.dv; ++i) {
            in[2 * KD + g * r * s.dv + i] = grp_in[2 * s.dk + i];                       // v
            want_z[t * VD + g * r * s.dv + i] = grp_in[2 * s.dk + r * s.dv + i];         // z
          }
          for (int64_t i = 0; i < r; ++i) {
            const float* b = ba.data() + t * 2 * s.nv + g * 2 * r;  // [b r | a r]
            in[s.conv_dim() + g * r + i] = b[r + i];        // a
            in[s.conv_dim() + s.nv + g * r + i] = b[i];     // b
          }
        }
      DeviceBuffer<float> dqkvz(qkvz), dba(ba), din(T * TI), dz(T * VD);
      deltanet_regroup(s, dqkvz.get(), dba.get(), T, din.get(), dz.get());
      ASSERT_TRUE(same_bits(din.to_host().data(), want_in.data(), T * TI));
      ASSERT_TRUE(same_bits(dz.to_host().data(), want_z.data(), T * VD));
    }
  }
}

// Tensor parallelism splits a Gated DeltaNet layer by key heads with their value heads: a rank
// holds key heads [r nk / R, (r + 1) nk / R), the value heads that read them, their conv channels
// (q, k and v columns), gates and recurrent states. Each rank's layer (fewer heads) gives bitwise
// those heads' outputs and states of the one-GPU layer, over calls of several spans and of one
// token each.
TEST_F(CudaTest, DeltaNetRanksHeadsAreTheFullLayersHeadsBitwise) {
  uint32_t seed = 1700;
  // Qwen3.5-35B-A3B (16 key heads, 32 value heads), Qwen3.5-0.8B, 3 value heads per key head.
  for (const DeltaNetShape& s :
       {DeltaNetShape{16, 32, 128, 128, 4}, DeltaNetShape{16, 16, 128, 128, 4},
        DeltaNetShape{2, 6, 48, 40, 2}}) {
    SCOPED_TRACE(name(s));
    const Layer L(s, seed);
    const std::vector<Seq> seqs = {make_seq(L, 30, seed + 1), make_seq(L, 9, seed + 2)};
    seed += 10;
    std::vector<std::vector<Piece>> calls = {{{0, 0, 13}, {1, 0, 4}}, {{1, 4, 5}, {0, 13, 10}}};
    for (int64_t t = 23; t < 30; ++t) calls.push_back({{0, t, 1}});  // decode steps
    const auto full = gpu_run(L, seqs, calls, true);
    const int64_t KD = s.key_dim(), C = s.conv_dim(), TI = s.token_inputs();
    for (int R : {2, 4, 8, 16}) {
      if (s.nk % R != 0) continue;
      const DeltaNetShape sr{s.nk / R, s.nv / R, s.dk, s.dv, s.K};
      const int64_t nkr = sr.nk, nvr = sr.nv, Cr = sr.conv_dim();
      for (int r = 0; r < R; ++r) {
        // The full layer's conv channel of the rank's channel c: its q, k and v columns.
        auto channel = [&](int64_t c) {
          if (c < nkr * s.dk) return r * nkr * s.dk + c;
          if (c < 2 * nkr * s.dk) return KD + r * nkr * s.dk + (c - nkr * s.dk);
          return 2 * KD + r * nvr * s.dv + (c - 2 * nkr * s.dk);
        };
        Layer Lr(sr, 0);
        for (int64_t c = 0; c < Cr; ++c)
          std::copy_n(L.conv_w.begin() + channel(c) * s.K, s.K, Lr.conv_w.begin() + c * s.K);
        std::copy_n(L.A_log.begin() + r * nvr, nvr, Lr.A_log.begin());
        std::copy_n(L.dt_bias.begin() + r * nvr, nvr, Lr.dt_bias.begin());
        Lr.d_conv_w = DeviceBuffer<float>(Lr.conv_w);
        Lr.d_A_log = DeviceBuffer<float>(Lr.A_log);
        Lr.d_dt_bias = DeviceBuffer<float>(Lr.dt_bias);
        std::vector<Seq> mine;
        for (const Seq& q : seqs) {
          Seq m;
          m.n = q.n;
          m.tokens.resize(q.n * sr.token_inputs());
          for (int64_t t = 0; t < q.n; ++t) {
            const float* in = &q.tokens[t * TI];
            float* o = &m.tokens[t * sr.token_inputs()];
            for (int64_t c = 0; c < Cr; ++c) o[c] = in[channel(c)];
            for (int64_t h = 0; h < nvr; ++h) {
              o[Cr + h] = in[C + r * nvr + h];                // a
              o[Cr + nvr + h] = in[C + s.nv + r * nvr + h];   // b
            }
          }
          m.conv0.resize(Cr * (s.K - 1));
          for (int64_t c = 0; c < Cr; ++c)
            std::copy_n(q.conv0.begin() + channel(c) * (s.K - 1), s.K - 1,
                        m.conv0.begin() + c * (s.K - 1));
          const int64_t head = s.dk * s.dv;
          m.delta0.assign(q.delta0.begin() + r * nvr * head,
                          q.delta0.begin() + (r + 1) * nvr * head);
          mine.push_back(std::move(m));
        }
        const auto part = gpu_run(Lr, mine, calls, true);
        const std::string tag = "R=" + std::to_string(R) + " rank " + std::to_string(r);
        for (size_t i = 0; i < seqs.size(); ++i) {
          for (int64_t t = 0; t < seqs[i].n; ++t)
            ASSERT_TRUE(same_bits(&part[i].core[t * nvr * s.dv],
                                  &full[i].core[t * s.value_dim() + r * nvr * s.dv], nvr * s.dv))
                << tag << " seq " << i << " token " << t << " core";
          const int64_t head = s.dk * s.dv;
          ASSERT_TRUE(same_bits(part[i].delta.data(), &full[i].delta[r * nvr * head], nvr * head))
              << tag << " seq " << i << " delta state";
          for (int64_t c = 0; c < Cr; ++c)
            ASSERT_TRUE(same_bits(&part[i].conv[c * (s.K - 1)],
                                  &full[i].conv[channel(c) * (s.K - 1)], s.K - 1))
                << tag << " seq " << i << " conv channel " << c;
        }
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
