#include "models/gated_deltanet_layer.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/profile.h"
#include "kernels/gated_delta.h"
#include "models/weights.h"

namespace lockstep {

DeltaNetDims DeltaNetDims::from(const ModelConfig& c) {
  DeltaNetDims d;
  d.nk = c.linear_num_key_heads;
  d.nv = c.linear_num_value_heads;
  d.dk = c.linear_key_head_dim;
  d.dv = c.linear_value_head_dim;
  d.K = c.linear_conv_kernel_dim;
  if (d.nk <= 0 || d.nv <= 0 || d.nv % d.nk != 0 || d.dk <= 0 || d.dv <= 0 || d.K < 1)
    fail(c.source, ": invalid linear-attention dimensions");
  return d;
}

DeltaNetState DeltaNetState::zeros(const DeltaNetDims& d) {
  DeltaNetState s;
  s.conv.assign(d.conv_state_floats(), 0.0f);
  s.delta.assign(d.delta_state_floats(), 0.0f);
  return s;
}

DeltaNetWeights load_deltanet(const Checkpoint& ckpt, const ModelConfig& c,
                              const std::string& p) {
  const DeltaNetDims d = DeltaNetDims::from(c);
  const int64_t H = c.hidden_size;
  DeltaNetWeights w;
  w.fused = c.model_type == "qwen3_next";
  if (w.fused) {
    w.qkvz = matrix(ckpt, p + "in_proj_qkvz.weight", 2 * d.key_dim() + 2 * d.value_dim(), H);
    w.ba = matrix(ckpt, p + "in_proj_ba.weight", 2 * d.nv, H);
  } else {
    w.qkv = matrix(ckpt, p + "in_proj_qkv.weight", d.conv_dim(), H);
    w.z = matrix(ckpt, p + "in_proj_z.weight", d.value_dim(), H);
    w.b = matrix(ckpt, p + "in_proj_b.weight", d.nv, H);
    w.a = matrix(ckpt, p + "in_proj_a.weight", d.nv, H);
  }
  w.conv = tensor_f32(ckpt, p + "conv1d.weight", {d.conv_dim(), 1, d.K});
  w.A_log = vector_f32(ckpt, p + "A_log", d.nv);
  w.dt_bias = vector_f32(ckpt, p + "dt_bias", d.nv);
  w.norm = vector_f32(ckpt, p + "norm.weight", d.dv);
  w.out = matrix(ckpt, p + "out_proj.weight", H, d.value_dim());
  return w;
}

void deltanet_project(const DeltaNetWeights& w, const DeltaNetDims& d, const float* h, int64_t T,
                      float* inputs, float* z, ThreadPool& threads) {
  const int64_t C = d.conv_dim(), TI = d.token_inputs(), nv = d.nv, VD = d.value_dim();
  if (!w.fused) {
    std::vector<float> qkv(T * C), a(T * nv), b(T * nv);
    kernels::linear(h, T, w.qkv, nullptr, qkv.data(), threads);
    kernels::linear(h, T, w.z, nullptr, z, threads);
    kernels::linear(h, T, w.a, nullptr, a.data(), threads);
    kernels::linear(h, T, w.b, nullptr, b.data(), threads);
    for (int64_t t = 0; t < T; ++t) {
      float* row = inputs + t * TI;
      std::memcpy(row, &qkv[t * C], C * sizeof(float));
      std::memcpy(row + C, &a[t * nv], nv * sizeof(float));
      std::memcpy(row + C + nv, &b[t * nv], nv * sizeof(float));
    }
    return;
  }
  // Qwen3-Next: in_proj_qkvz rows come in nk groups of [q dk | k dk | v r*dv | z r*dv] and
  // in_proj_ba rows in nk groups of [b r | a r], r = nv / nk value heads per key head; group g
  // owns value heads g*r .. g*r+r-1. Regroup to q (all heads) | k | v, z, a, b.
  const int64_t r = nv / d.nk, KD = d.key_dim(), grp = 2 * d.dk + 2 * r * d.dv;
  std::vector<float> qkvz(T * w.qkvz.rows), ba(T * 2 * nv);
  kernels::linear(h, T, w.qkvz, nullptr, qkvz.data(), threads);
  kernels::linear(h, T, w.ba, nullptr, ba.data(), threads);
  for (int64_t t = 0; t < T; ++t) {
    float* row = inputs + t * TI;
    for (int64_t g = 0; g < d.nk; ++g) {
      const float* src = &qkvz[t * w.qkvz.rows + g * grp];
      std::memcpy(row + g * d.dk, src, d.dk * sizeof(float));
      std::memcpy(row + KD + g * d.dk, src + d.dk, d.dk * sizeof(float));
      std::memcpy(row + 2 * KD + g * r * d.dv, src + 2 * d.dk, r * d.dv * sizeof(float));
      std::memcpy(z + t * VD + g * r * d.dv, src + 2 * d.dk + r * d.dv, r * d.dv * sizeof(float));
      const float* sba = &ba[t * 2 * nv + g * 2 * r];
      std::memcpy(row + C + g * r, sba + r, r * sizeof(float));       // a
      std::memcpy(row + C + nv + g * r, sba, r * sizeof(float));      // b
    }
  }
}

void deltanet_token_prepare(const DeltaNetWeights& w, const DeltaNetDims& d, float* conv_state,
                            const float* inputs, float* prepared) {
  const int64_t C = d.conv_dim(), KD = d.key_dim();
  kernels::causal_conv1d_step(inputs, C, d.K, w.conv.data(), conv_state, prepared);
  kernels::l2_normalize(prepared, 2 * d.nk, d.dk, 1e-6f);  // q heads then k heads
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.dk));
  for (int64_t i = 0; i < KD; ++i) prepared[i] *= scale;
  kernels::delta_gates(inputs + C, inputs + C + d.nv, w.A_log.data(), w.dt_bias.data(), d.nv,
                       prepared + C, prepared + C + d.nv);
}

void deltanet_token_head(const DeltaNetDims& d, float* delta_state, const float* prepared,
                         int64_t h, float* out) {
  const int64_t C = d.conv_dim(), KD = d.key_dim();
  const int64_t kh = h / (d.nv / d.nk);  // key head h serves value heads kh*r .. kh*r+r-1
  kernels::gated_delta_step(delta_state + h * d.dk * d.dv, d.dk, d.dv, prepared + kh * d.dk,
                            prepared + KD + kh * d.dk, prepared + 2 * KD + h * d.dv,
                            prepared[C + h], prepared[C + d.nv + h], out);
}

void deltanet_mix(const DeltaNetWeights& w, const DeltaNetDims& d, const float* inputs,
                  const float* z, int64_t T, std::span<const DeltaNetSpan> spans, float eps,
                  float* out, ThreadPool& threads) {
  const int64_t TI = d.token_inputs(), P = d.conv_dim() + 2 * d.nv, VD = d.value_dim();
  // Conv and gates run per span in token order (the conv state is sequential); the delta rule of
  // each (span, head) pair runs all of that span's tokens in order on one thread.
  std::vector<float> prepared(T * P), core(T * VD);
  for (const DeltaNetSpan& s : spans)
    for (int64_t t = s.first; t < s.first + s.n; ++t)
      deltanet_token_prepare(w, d, s.state->conv.data(), inputs + t * TI, &prepared[t * P]);
  const int64_t jobs = static_cast<int64_t>(spans.size()) * d.nv;
  {
    profile::Scope prof(profile::Op::DeltaNetStep);
    threads.parallel_for(jobs, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        const DeltaNetSpan& s = spans[j / d.nv];
        const int64_t h = j % d.nv;
        for (int64_t t = s.first; t < s.first + s.n; ++t)
          deltanet_token_head(d, s.state->delta.data(), &prepared[t * P], h,
                              &core[t * VD + h * d.dv]);
      }
    });
  }
  kernels::gated_rms_norm(core.data(), z, T * d.nv, d.dv, w.norm.data(), eps, core.data());
  kernels::linear(core.data(), T, w.out, nullptr, out, threads);
}

void deltanet_replay(const DeltaNetWeights& w, const DeltaNetDims& d, DeltaNetState& s,
                     const float* inputs, int64_t n) {
  std::vector<float> prepared(d.conv_dim() + 2 * d.nv);
  for (int64_t t = 0; t < n; ++t) {
    deltanet_token_prepare(w, d, s.conv.data(), inputs + t * d.token_inputs(), prepared.data());
    for (int64_t h = 0; h < d.nv; ++h)
      deltanet_token_head(d, s.delta.data(), prepared.data(), h, nullptr);
  }
}

}  // namespace lockstep
