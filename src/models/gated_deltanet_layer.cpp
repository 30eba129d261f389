#include "models/gated_deltanet_layer.h"

#include <vector>

#include "core/error.h"
#include "models/weights.h"

namespace lockstep {

DeltaNetDims deltanet_dims(const ModelConfig& c) {
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

DeltaNetState DeltaNetState::zeros(const DeltaNetDims& d, kernels::Backend& be) {
  DeltaNetState s;
  s.conv = be.upload(std::vector<float>(d.conv_state_floats(), 0.0f));
  s.delta = be.upload(std::vector<float>(d.delta_state_floats(), 0.0f));
  return s;
}

DeltaNetState DeltaNetState::copy(kernels::Backend& be) const {
  DeltaNetState s;
  s.conv = be.array<float>(conv.size());
  s.delta = be.array<float>(delta.size());
  s.assign(*this, be);
  return s;
}

void DeltaNetState::assign(const DeltaNetState& src, kernels::Backend& be) {
  LOCKSTEP_CHECK(conv.size() == src.conv.size() && delta.size() == src.delta.size(),
                 "DeltaNetState::assign: sizes differ");
  be.copy(conv.data(), src.conv.data(), conv.size() * sizeof(float));
  be.copy(delta.data(), src.delta.data(), delta.size() * sizeof(float));
}

DeltaNetWeights load_deltanet(const Checkpoint& ckpt, const ModelConfig& c, const std::string& p,
                              kernels::Backend& be) {
  const DeltaNetDims d = deltanet_dims(c);
  const int64_t H = c.hidden_size;
  DeltaNetWeights w;
  w.fused = c.model_type == "qwen3_next";
  if (w.fused) {
    w.qkvz = be.place_column_parallel(
        matrix(ckpt, p + "in_proj_qkvz.weight", 2 * d.key_dim() + 2 * d.value_dim(), H));
    w.ba = be.place_column_parallel(matrix(ckpt, p + "in_proj_ba.weight", 2 * d.nv, H));
  } else {
    w.qkv = be.place_column_parallel(matrix(ckpt, p + "in_proj_qkv.weight", d.conv_dim(), H));
    w.z = be.place_column_parallel(matrix(ckpt, p + "in_proj_z.weight", d.value_dim(), H));
    w.b = be.place_column_parallel(matrix(ckpt, p + "in_proj_b.weight", d.nv, H));
    w.a = be.place_column_parallel(matrix(ckpt, p + "in_proj_a.weight", d.nv, H));
  }
  w.conv = be.upload(tensor_f32(ckpt, p + "conv1d.weight", {d.conv_dim(), 1, d.K}));
  w.A_log = be.upload(vector_f32(ckpt, p + "A_log", d.nv));
  w.dt_bias = be.upload(vector_f32(ckpt, p + "dt_bias", d.nv));
  w.norm = be.upload(vector_f32(ckpt, p + "norm.weight", d.dv));
  w.out = be.place_row_parallel(matrix(ckpt, p + "out_proj.weight", H, d.value_dim()));
  return w;
}

void deltanet_project(const DeltaNetWeights& w, const DeltaNetDims& d, const float* h, int64_t T,
                      float* inputs, float* z, kernels::Backend& be) {
  const int64_t C = d.conv_dim(), TI = d.token_inputs(), nv = d.nv;
  if (!w.fused) {
    if (T == 1) {  // one row: qkv | a | b are inputs' own column blocks, so no copies (decode)
      const kernels::LinearOut proj[] = {{&w.qkv, nullptr, inputs},
                                         {&w.z, nullptr, z},
                                         {&w.a, nullptr, inputs + C},
                                         {&w.b, nullptr, inputs + C + nv}};
      be.linear_multi(h, T, proj);
      return;
    }
    kernels::Floats qkv = be.array<float>(T * C), a = be.array<float>(T * nv),
                    b = be.array<float>(T * nv);
    const kernels::LinearOut proj[] = {{&w.qkv, nullptr, qkv.data()},
                                       {&w.z, nullptr, z},
                                       {&w.a, nullptr, a.data()},
                                       {&w.b, nullptr, b.data()}};
    be.linear_multi(h, T, proj);
    be.copy_2d(inputs, TI, qkv.data(), C, T, C);
    be.copy_2d(inputs + C, TI, a.data(), nv, T, nv);
    be.copy_2d(inputs + C + nv, TI, b.data(), nv, T, nv);
    return;
  }
  // Qwen3-Next: in_proj_qkvz rows come in nk groups of [q dk | k dk | v r*dv | z r*dv] and
  // in_proj_ba rows in nk groups of [b r | a r], r = nv / nk value heads per key head; group g
  // owns value heads g*r .. g*r+r-1. deltanet_regroup puts them into q (all heads) | k | v, z,
  // a, b.
  kernels::Floats qkvz = be.array<float>(T * w.qkvz.rows), ba = be.array<float>(T * 2 * nv);
  const kernels::LinearOut proj[] = {{&w.qkvz, nullptr, qkvz.data()},
                                     {&w.ba, nullptr, ba.data()}};
  be.linear_multi(h, T, proj);
  be.deltanet_regroup(d, qkvz.data(), ba.data(), T, inputs, z);
}

void deltanet_mix(const DeltaNetWeights& w, const DeltaNetDims& d, const float* inputs,
                  const float* z, int64_t T, const kernels::DeltaNetSpan* spans, int64_t n_spans,
                  int64_t max_span_tokens, float eps, float* out, kernels::Backend& be) {
  kernels::Floats core = be.array<float>(T * d.value_dim());
  be.deltanet_step_norm(d, w.conv.data(), w.A_log.data(), w.dt_bias.data(), inputs, T, spans,
                        n_spans, max_span_tokens, z, w.norm.data(), eps, core.data());
  be.linear(core.data(), T, w.out, nullptr, out);
}

void deltanet_replay(const DeltaNetWeights& w, const DeltaNetDims& d, DeltaNetState& s,
                     const float* inputs, int64_t n, kernels::Backend& be) {
  if (n <= 0) return;
  const kernels::DeltaNetSpan span{s.conv.data(), s.delta.data(), 0, static_cast<int32_t>(n)};
  const std::vector<kernels::DeltaNetSpan> host{span};
  kernels::DeviceArray<kernels::DeltaNetSpan> dev = be.upload(host);
  be.deltanet_step(d, w.conv.data(), w.A_log.data(), w.dt_bias.data(), inputs, n, dev.data(), 1, n,
                   nullptr);
}

}  // namespace lockstep
