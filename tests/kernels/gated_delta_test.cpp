// Gated DeltaNet kernels against a plain float64 statement of the same maths (from the definition
// in transformers' torch_recurrent_gated_delta_rule), and the key-dim reductions against
// scheduled_dot bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/gated_delta.h"
#include "kernels/schedule.h"
#include "test_util.h"

namespace lockstep::kernels {
namespace {

double silu64(double x) { return x / (1.0 + std::exp(-x)); }

TEST(GatedDelta, RecurrentStepMatchesFloat64OverManyTokens) {
  // dk, dv not multiples of 16 and different, as in the fixtures; 40 tokens so decay and
  // delta updates compound.
  const int64_t dk = 12, dv = 20, steps = 40;
  std::vector<float> S(dk * dv, 0.0f), out(dv);
  std::vector<double> S64(dk * dv, 0.0);
  double worst = 0;
  for (int64_t t = 0; t < steps; ++t) {
    auto q = test::random_floats(dk, 100 + t), k = test::random_floats(dk, 200 + t);
    const auto v = test::random_floats(dv, 300 + t);
    l2_normalize(q.data(), 1, dk, 1e-6f);
    l2_normalize(k.data(), 1, dk, 1e-6f);
    for (auto& x : q) x *= 1.0f / std::sqrt(static_cast<float>(dk));
    const float g = -0.3f - 0.01f * static_cast<float>(t % 7), beta = 0.2f + 0.02f * (t % 30);
    gated_delta_step(S.data(), dk, dv, q.data(), k.data(), v.data(), g, beta, out.data());

    const double decay = std::exp(static_cast<double>(g));
    for (auto& s : S64) s *= decay;
    std::vector<double> delta(dv), o(dv, 0.0);
    for (int64_t j = 0; j < dv; ++j) {
      double kv = 0;
      for (int64_t i = 0; i < dk; ++i) kv += S64[i * dv + j] * k[i];
      delta[j] = (v[j] - kv) * beta;
    }
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t j = 0; j < dv; ++j) S64[i * dv + j] += k[i] * delta[j];
    for (int64_t j = 0; j < dv; ++j) {
      for (int64_t i = 0; i < dk; ++i) o[j] += S64[i * dv + j] * q[i];
      worst = std::max(worst, std::fabs(o[j] - out[j]));
    }
  }
  for (int64_t i = 0; i < dk * dv; ++i) worst = std::max(worst, std::fabs(S64[i] - S[i]));
  EXPECT_LT(worst, 2e-5);
}

TEST(GatedDelta, KeyReductionsAreTheScheduledDot) {
  const int64_t dk = 37, dv = 5;  // dk not a multiple of 16: exercises the padding lanes
  auto S = test::random_floats(dk * dv, 1);
  const auto q = test::random_floats(dk, 2), k = test::random_floats(dk, 3),
             v = test::random_floats(dv, 4);
  std::vector<float> S2 = S, out(dv);
  // With decay 1 and beta 0 the state is unchanged and out = S^T q exactly as scheduled_dot.
  gated_delta_step(S2.data(), dk, dv, q.data(), k.data(), v.data(), 0.0f, 0.0f, out.data());
  for (int64_t j = 0; j < dv; ++j) {
    const float want = scheduled_dot(dk, [&](int64_t i) { return S[i * dv + j]; },
                                     [&](int64_t i) { return q[i]; });
    EXPECT_TRUE(test::same_bits(&want, &out[j], 1)) << j;
  }
}

TEST(GatedDelta, StateWithoutOutputIsTheSame) {
  const int64_t dk = 16, dv = 16;
  auto S1 = test::random_floats(dk * dv, 9), S2 = S1;
  const auto q = test::random_floats(dk, 2), k = test::random_floats(dk, 3),
             v = test::random_floats(dv, 4);
  std::vector<float> out(dv);
  gated_delta_step(S1.data(), dk, dv, q.data(), k.data(), v.data(), -0.5f, 0.7f, out.data());
  gated_delta_step(S2.data(), dk, dv, q.data(), k.data(), v.data(), -0.5f, 0.7f, nullptr);
  EXPECT_TRUE(test::same_bits(S1.data(), S2.data(), S1.size()));
}

TEST(GatedDelta, CausalConvStepMatchesFloat64) {
  const int64_t C = 7, K = 4, T = 9;
  const auto w = test::random_floats(C * K, 5, 0.5f), x = test::random_floats(C * T, 6);
  std::vector<float> state(C * (K - 1), 0.0f), out(C);
  for (int64_t t = 0; t < T; ++t) {
    causal_conv1d_step(&x[t * C], C, K, w.data(), state.data(), out.data());
    for (int64_t c = 0; c < C; ++c) {
      double acc = 0;  // y[c,t] = sum_j w[c,j] x[c, t-K+1+j], zeros before the first token
      for (int64_t j = 0; j < K; ++j) {
        const int64_t s = t - K + 1 + j;
        if (s >= 0) acc += static_cast<double>(w[c * K + j]) * x[s * C + c];
      }
      EXPECT_NEAR(out[c], silu64(acc), 1e-6) << "t " << t << " c " << c;
    }
  }
}

TEST(GatedDelta, GatedRmsNormAndGatesMatchFloat64) {
  const int64_t D = 20, rows = 3;
  const auto x = test::random_floats(D * rows, 7), z = test::random_floats(D * rows, 8),
             w = test::random_floats(D, 9);
  std::vector<float> y(D * rows);
  gated_rms_norm(x.data(), z.data(), rows, D, w.data(), 1e-6f, y.data());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(x[r * D + d]) * x[r * D + d];
    const double inv = 1.0 / std::sqrt(ss / D + 1e-6);
    for (int64_t d = 0; d < D; ++d)
      EXPECT_NEAR(y[r * D + d], x[r * D + d] * inv * w[d] * silu64(z[r * D + d]), 2e-6);
  }
  const float a[3] = {-3.0f, 0.2f, 25.0f}, b[3] = {-1.0f, 0.0f, 4.0f};
  const float A_log[3] = {-1.0f, 0.5f, 2.0f}, dt[3] = {0.3f, -0.2f, 1.0f};
  float g[3], beta[3];
  delta_gates(a, b, A_log, dt, 3, g, beta);
  for (int h = 0; h < 3; ++h) {
    const double u = static_cast<double>(a[h]) + dt[h];
    const double sp = u > 20 ? u : std::log1p(std::exp(u));
    EXPECT_NEAR(g[h], -std::exp(static_cast<double>(A_log[h])) * sp, 1e-5 * (1 + std::fabs(g[h])));
    EXPECT_NEAR(beta[h], 1.0 / (1.0 + std::exp(-static_cast<double>(b[h]))), 1e-7);
  }
}

}  // namespace
}  // namespace lockstep::kernels
