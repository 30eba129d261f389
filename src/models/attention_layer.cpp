#include "models/attention_layer.h"

#include <cmath>

#include "models/weights.h"

namespace lockstep {

namespace {
kernels::Floats optional_vector(const Checkpoint& ckpt, const std::string& name, int64_t n,
                                bool required, kernels::Backend& be) {
  if (!required && !ckpt.has(name)) return {};
  return be.upload(vector_f32(ckpt, name, n));
}
}  // namespace

AttentionWeights load_attention(const Checkpoint& ckpt, const ModelConfig& c,
                                const std::string& p, kernels::Backend& be) {
  AttentionWeights w;
  const int64_t H = c.hidden_size, hd = c.head_dim;
  const int64_t qd = c.num_attention_heads * hd, kvd = c.num_key_value_heads * hd;
  w.gated = c.attn_output_gate;
  w.q = be.place_column_parallel(matrix(ckpt, p + "q_proj.weight", w.gated ? 2 * qd : qd, H));
  w.k = be.place_column_parallel(matrix(ckpt, p + "k_proj.weight", kvd, H));
  w.v = be.place_column_parallel(matrix(ckpt, p + "v_proj.weight", kvd, H));
  w.o = be.place_row_parallel(matrix(ckpt, p + "o_proj.weight", H, qd));
  if (c.attention_bias) {
    w.q_bias = be.upload(vector_f32(ckpt, p + "q_proj.bias", w.q.rows));
    w.k_bias = be.upload(vector_f32(ckpt, p + "k_proj.bias", kvd));
    w.v_bias = be.upload(vector_f32(ckpt, p + "v_proj.bias", kvd));
  }
  w.o_bias = optional_vector(ckpt, p + "o_proj.bias", H, false, be);
  if (c.qk_norm) {
    w.q_norm = be.upload(vector_f32(ckpt, p + "q_norm.weight", hd));
    w.k_norm = be.upload(vector_f32(ckpt, p + "k_norm.weight", hd));
  }
  return w;
}

void attention_forward(const AttentionWeights& w, const ModelConfig& c, const float* h, int64_t T,
                       const BatchRows& rows, KvPool& pool, int64_t kv_layer, float* out,
                       kernels::Backend& be, const AttentionOptions& options) {
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
  const int64_t qd = nh * hd, kvd = nkv * hd;
  kernels::Floats qg = be.array<float>(T * w.q.rows), k = be.array<float>(T * kvd),
                  v = be.array<float>(T * kvd);
  const kernels::LinearOut qkv[] = {{&w.q, data_or_null(w.q_bias), qg.data()},
                                     {&w.k, data_or_null(w.k_bias), k.data()},
                                     {&w.v, data_or_null(w.v_bias), v.data()}};
  be.linear_multi(h, T, qkv);

  // Gated: per head [query (hd) | gate (hd)]; attention_prep reads the query halves in place.
  kernels::Floats q = w.gated ? be.array<float>(T * qd) : std::move(qg), gate;
  if (w.gated) {
    gate = be.array<float>(T * qd);
    be.copy_2d(gate.data(), hd, qg.data() + hd, 2 * hd, T * nh, hd);
  }
  // q/k norm, RoPE, then keys and values into the cache, in one op. Keys and values are written
  // before attention reads them: a row sees the rows before it in the same call exactly as it
  // would see them from an earlier call.
  const kernels::KvLayerView layer = pool.layer(kv_layer);
  kernels::AttentionPrep prep;
  prep.q_in = w.gated ? qg.data() : q.data();
  prep.q_in_stride = w.gated ? 2 * hd : hd;
  prep.q = q.data();
  prep.k = k.data();
  prep.v = v.data();
  prep.T = T;
  prep.n_heads = nh;
  prep.q_norm = data_or_null(w.q_norm);
  prep.k_norm = data_or_null(w.k_norm);
  prep.eps = static_cast<float>(c.rms_norm_eps);
  prep.zero_centered = c.zero_centered_norm;
  prep.rotary_dim = c.rotary_dim();
  prep.cos_sin = options.cos_sin ? options.cos_sin : rows.cos_sin.data();
  prep.slots = rows.slots.data();
  be.attention_prep(prep, layer);
  kernels::Floats attn = be.array<float>(T * qd);
  kernels::AttentionBatch batch = rows.attn;
  batch.window = options.window;
  const float scale =
      options.scale > 0 ? options.scale : 1.0f / std::sqrt(static_cast<float>(hd));
  be.attention(q.data(), T, batch, nh, layer, scale, attn.data());
  if (w.gated) be.sigmoid_mul(attn.data(), gate.data(), T * qd);
  be.linear(attn.data(), T, w.o, data_or_null(w.o_bias), out);
}

MlpWeights load_mlp(const Checkpoint& ckpt, const ModelConfig& c, const std::string& p,
                    kernels::Backend& be, int64_t intermediate) {
  MlpWeights w;
  const int64_t H = c.hidden_size, I = intermediate < 0 ? c.intermediate_size : intermediate;
  w.gate = be.place_column_parallel(matrix(ckpt, p + "gate_proj.weight", I, H));
  w.up = be.place_column_parallel(matrix(ckpt, p + "up_proj.weight", I, H));
  w.down = be.place_row_parallel(matrix(ckpt, p + "down_proj.weight", H, I));
  w.gate_bias = optional_vector(ckpt, p + "gate_proj.bias", I, c.mlp_bias, be);
  w.up_bias = optional_vector(ckpt, p + "up_proj.bias", I, c.mlp_bias, be);
  w.down_bias = optional_vector(ckpt, p + "down_proj.bias", H, c.mlp_bias, be);
  w.gelu_tanh = c.hidden_activation == "gelu_pytorch_tanh";
  return w;
}

void mlp_forward(const MlpWeights& w, const float* h, int64_t T, float* out, kernels::Backend& be) {
  const int64_t I = w.gate.rows;
  kernels::Floats g = be.array<float>(T * I), u = be.array<float>(T * I);
  const kernels::LinearOut gate_up[] = {{&w.gate, data_or_null(w.gate_bias), g.data()},
                                         {&w.up, data_or_null(w.up_bias), u.data()}};
  be.linear_multi(h, T, gate_up);
  mlp_down(w, g.data(), u.data(), T, out, be);
}

void mlp_down(const MlpWeights& w, float* g, const float* u, int64_t T, float* out,
              kernels::Backend& be) {
  const int64_t I = w.gate.rows;
  if (w.gelu_tanh) be.gelu_tanh_mul(g, u, g, T * I);
  else be.silu_mul(g, u, g, T * I);
  be.linear(g, T, w.down, data_or_null(w.down_bias), out);
}

}  // namespace lockstep
