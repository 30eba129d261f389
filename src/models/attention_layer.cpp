#include "models/attention_layer.h"

#include <cmath>
#include <cstring>

#include "kernels/math.h"
#include "models/weights.h"

namespace lockstep {

namespace {
std::vector<float> optional_vector(const Checkpoint& ckpt, const std::string& name, int64_t n,
                                   bool required) {
  if (!required && !ckpt.has(name)) return {};
  return vector_f32(ckpt, name, n);
}
const float* data_or_null(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }
}  // namespace

AttentionWeights load_attention(const Checkpoint& ckpt, const ModelConfig& c,
                                const std::string& p) {
  AttentionWeights w;
  const int64_t H = c.hidden_size, hd = c.head_dim;
  const int64_t qd = c.num_attention_heads * hd, kvd = c.num_key_value_heads * hd;
  w.gated = c.attn_output_gate;
  w.q = matrix(ckpt, p + "q_proj.weight", w.gated ? 2 * qd : qd, H);
  w.k = matrix(ckpt, p + "k_proj.weight", kvd, H);
  w.v = matrix(ckpt, p + "v_proj.weight", kvd, H);
  w.o = matrix(ckpt, p + "o_proj.weight", H, qd);
  if (c.attention_bias) {
    w.q_bias = vector_f32(ckpt, p + "q_proj.bias", w.q.rows);
    w.k_bias = vector_f32(ckpt, p + "k_proj.bias", kvd);
    w.v_bias = vector_f32(ckpt, p + "v_proj.bias", kvd);
  }
  w.o_bias = optional_vector(ckpt, p + "o_proj.bias", H, false);
  if (c.qk_norm) {
    w.q_norm = vector_f32(ckpt, p + "q_norm.weight", hd);
    w.k_norm = vector_f32(ckpt, p + "k_norm.weight", hd);
  }
  return w;
}

void attention_forward(const AttentionWeights& w, const ModelConfig& c, const float* h, int64_t T,
                       const BatchRows& rows, KvPool& pool, int64_t kv_layer, float* out,
                       ThreadPool& threads) {
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
  const int64_t qd = nh * hd, kvd = nkv * hd;
  std::vector<float> qg(T * w.q.rows), q, k(T * kvd), v(T * kvd);
  kernels::linear(h, T, w.q, data_or_null(w.q_bias), qg.data(), threads);
  kernels::linear(h, T, w.k, data_or_null(w.k_bias), k.data(), threads);
  kernels::linear(h, T, w.v, data_or_null(w.v_bias), v.data(), threads);

  std::vector<float> gate;
  if (w.gated) {  // per head: [query (hd) | gate (hd)]
    q.resize(T * qd);
    gate.resize(T * qd);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t hh = 0; hh < nh; ++hh) {
        const float* src = &qg[(t * nh + hh) * 2 * hd];
        std::memcpy(&q[(t * nh + hh) * hd], src, hd * sizeof(float));
        std::memcpy(&gate[(t * nh + hh) * hd], src + hd, hd * sizeof(float));
      }
  } else {
    q = std::move(qg);
  }
  if (!w.q_norm.empty()) {
    kernels::rms_norm(q.data(), T * nh, hd, w.q_norm.data(), static_cast<float>(c.rms_norm_eps),
                      c.zero_centered_norm, q.data());
    kernels::rms_norm(k.data(), T * nkv, hd, w.k_norm.data(), static_cast<float>(c.rms_norm_eps),
                      c.zero_centered_norm, k.data());
  }
  const int64_t rd = c.rotary_dim();
  kernels::rope(q.data(), T, nh, hd, rd, rows.cos_sin.data());
  kernels::rope(k.data(), T, nkv, hd, rd, rows.cos_sin.data());

  // Keys and values are written before attention reads them: a row sees the rows before it in
  // the same call exactly as it would see them from an earlier call.
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(pool.key_slot(kv_layer, *rows.blocks[t], rows.positions[t]), &k[t * kvd],
                kvd * sizeof(float));
    std::memcpy(pool.value_slot(kv_layer, *rows.blocks[t], rows.positions[t]), &v[t * kvd],
                kvd * sizeof(float));
  }
  std::vector<float> attn(T * qd);
  kernels::attention(q.data(), T, rows.attn, nh, pool.layer(kv_layer),
                     1.0f / std::sqrt(static_cast<float>(hd)), attn.data(), threads);
  if (w.gated)
    for (int64_t i = 0; i < T * qd; ++i) attn[i] *= kernels::sigmoid_f32(gate[i]);
  kernels::linear(attn.data(), T, w.o, data_or_null(w.o_bias), out, threads);
}

MlpWeights load_mlp(const Checkpoint& ckpt, const ModelConfig& c, const std::string& p) {
  MlpWeights w;
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  w.gate = matrix(ckpt, p + "gate_proj.weight", I, H);
  w.up = matrix(ckpt, p + "up_proj.weight", I, H);
  w.down = matrix(ckpt, p + "down_proj.weight", H, I);
  w.gate_bias = optional_vector(ckpt, p + "gate_proj.bias", I, c.mlp_bias);
  w.up_bias = optional_vector(ckpt, p + "up_proj.bias", I, c.mlp_bias);
  w.down_bias = optional_vector(ckpt, p + "down_proj.bias", H, c.mlp_bias);
  return w;
}

void mlp_forward(const MlpWeights& w, const float* h, int64_t T, float* out, ThreadPool& threads) {
  const int64_t I = w.gate.rows;
  std::vector<float> g(T * I), u(T * I);
  kernels::linear(h, T, w.gate, data_or_null(w.gate_bias), g.data(), threads);
  kernels::linear(h, T, w.up, data_or_null(w.up_bias), u.data(), threads);
  kernels::silu_mul(g.data(), u.data(), g.data(), T * I);
  kernels::linear(g.data(), T, w.down, data_or_null(w.down_bias), out, threads);
}

}  // namespace lockstep
