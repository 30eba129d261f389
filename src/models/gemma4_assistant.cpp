// The Gemma 4 assistant's forward (models/gemma4_assistant.h has the math). It owns no cache and
// writes none: its attention reads the target's KvPool through a block table copied from the
// target sequence, with the query at position n and n keys. A sliding layer sees the last
// sliding_window + 1 keys: transformers' create_bidirectional_sliding_window_mask keeps, for
// query index 0 and kv indices 0..n-1, those with |q - kv| <= sliding_window (inclusive), and the
// assistant flips that mask along kv, so kv n-1-window .. n-1 remain; the kernel's window w at
// row n - 1 keeps (n - 1 - w, n - 1], hence w = sliding_window + 1.
#include "models/gemma4_assistant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "models/attention_layer.h"
#include "models/forward_common.h"
#include "models/gemma4.h"
#include "models/gemma_common.h"
#include "models/weights.h"

namespace lockstep {

namespace {

struct AssistantLayer {
  kernels::Floats input_norm, post_attention_norm, pre_feedforward_norm, post_feedforward_norm;
  kernels::Weight q, o;
  kernels::Floats q_norm;
  MlpWeights mlp;
  float layer_scalar = 1.0f;
  int64_t head_dim = 0, window = 0, kv_layer = 0;  // kv_layer: the target's KvPool layer
};

// The head-shape field of an assistant layer kind, for errors.
const char* head_dim_field(bool sliding) {
  return sliding ? "text_config.head_dim" : "text_config.global_head_dim";
}
const char* kv_heads_field(bool sliding) {
  return sliding ? "text_config.num_key_value_heads" : "text_config.num_global_key_value_heads";
}

class Assistant final : public Gemma4Assistant {
 public:
  Assistant(const std::string& dir, const Model& target)
      : c_(load_gemma4_assistant_config(dir)),
        src_(lend(target, c_)),
        ckpt_(Checkpoint::open(dir)),
        rope_sliding_(gemma4_rope_table(c_.text.gemma4.sliding_rope, kind_head_dim(true))),
        rope_full_(gemma4_rope_table(c_.text.gemma4.full_rope, kind_head_dim(false))) {
    const ModelConfig& t = c_.text;
    const Checkpoint& w = *ckpt_;
    kernels::Backend& be = *src_.backend;
    const int64_t H = t.hidden_size, B = c_.backbone_hidden_size, V = t.vocab_size;
    check_geometry(target.config());
    pre_projection_ = be.place(matrix(w, "pre_projection.weight", H, 2 * B));
    post_projection_ = be.place(matrix(w, "post_projection.weight", B, H));
    for (int64_t l = 0; l < t.num_hidden_layers; ++l)
      layers_.push_back(load_layer(w, "model.layers." + std::to_string(l) + ".", l, be));
    final_norm_ = be.upload(vector_f32(w, "model.norm.weight", H));
    // Tied: lm_head is the assistant's own embed_tokens (its input embedding is never used; the
    // target's embeds the token).
    const bool own_head = w.has("lm_head.weight") || !c_.tie_word_embeddings;
    lm_head_ = be.place(matrix(w, own_head ? "lm_head.weight" : "model.embed_tokens.weight", V, H));
    if (c_.use_ordered_embeddings) load_ordered_embedder(w, be);
  }

  const Gemma4AssistantConfig& config() const override { return c_; }

  ForwardResult draft(std::span<const Step> steps) override {
    const ModelConfig& t = c_.text;
    kernels::Backend& be = *src_.backend;
    const int64_t T = static_cast<int64_t>(steps.size());
    const int64_t H = t.hidden_size, B = c_.backbone_hidden_size, V = t.vocab_size;
    const float eps = static_cast<float>(t.rms_norm_eps);
    if (T == 0) return {};

    // Rows: token, hidden, position n, the target's block table and n keys.
    std::vector<int32_t> tokens, n_keys, tables;
    std::vector<int64_t> positions;
    std::vector<float> hidden;
    int64_t stride = 1, max_keys = 0;
    for (const Step& s : steps) {
      if (!s.target || s.target->length < 1)
        fail("assistant draft: the target sequence holds no tokens (its cache is what it reads)");
      if (s.token < 0 || s.token >= V)
        fail("assistant draft: token id ", s.token, " is outside the vocabulary [0, ", V, ")");
      if (static_cast<int64_t>(s.hidden.size()) != B)
        fail("assistant draft: hidden has ", s.hidden.size(), " floats, expected ", B,
             " (backbone_hidden_size)");
      stride = std::max<int64_t>(stride, static_cast<int64_t>(s.target->kv_blocks.size()));
      max_keys = std::max(max_keys, s.target->length);
    }
    // A draft step reads nothing back before its outputs, so a backend may record and replay it
    // (CUDA: one graph launch instead of ~12 launches per layer). The key holds the row count
    // and the key bound rounded up to kKeyBucket; the block tables are padded to that bound, so
    // every address and launch shape is a function of the key (attention's bits depend on
    // neither).
    const std::string key = recordable_step(T, T, t.vocab_size)
                                ? "gemma4_assistant|" + std::to_string(T) + "|k" +
                                      std::to_string(key_bucket(max_keys))
                                : "";
    if (!key.empty()) pad_to_key_bucket(max_keys, stride, src_.kv->block_tokens());
    RecordedStep recorded(be, key);
    for (const Step& s : steps) {
      tokens.push_back(s.token);
      positions.push_back(s.target->length);
      n_keys.push_back(static_cast<int32_t>(s.target->length));
      const size_t at = tables.size();
      tables.resize(at + stride, 0);
      std::copy(s.target->kv_blocks.begin(), s.target->kv_blocks.end(), tables.begin() + at);
      hidden.insert(hidden.end(), s.hidden.begin(), s.hidden.end());
    }
    const kernels::Ints d_tokens = be.upload(tokens), d_tables = be.upload(tables),
                        d_keys = be.upload(n_keys);
    const kernels::AttentionBatch batch{d_tables.data(), stride, d_keys.data(), max_keys, 0};
    std::vector<float> host(T * rope_sliding_.rotary_dim());
    rope_sliding_.fill(positions.data(), T, host.data());
    const kernels::Floats cs_sliding = be.upload(host);
    host.assign(T * rope_full_.rotary_dim(), 0.0f);
    rope_full_.fill(positions.data(), T, host.data());
    const kernels::Floats cs_full = be.upload(host);

    // x = pre_projection([target_embed(token) * scale | hidden]).
    const kernels::Floats d_hidden = be.upload(hidden);
    kernels::Floats e = be.array<float>(T * B), cat = be.array<float>(T * 2 * B),
                    x = be.array<float>(T * H);
    be.embedding(src_.embed, d_tokens.data(), T, e.data());
    be.scale(e.data(), T * B, src_.embed_scale);
    be.copy_2d(cat.data(), 2 * B, e.data(), B, T, B);
    be.copy_2d(cat.data() + B, 2 * B, d_hidden.data(), B, T, B);
    be.linear(cat.data(), T, pre_projection_, nullptr, x.data());

    for (const AssistantLayer& L : layers_)
      layer_forward(L, x.data(), T, batch, L.window > 0 ? cs_sliding.data() : cs_full.data());

    kernels::Floats z = be.array<float>(T * H), next = be.array<float>(T * B),
                    logits = be.array<float>(T * V);
    be.rms_norm(x.data(), T, H, final_norm_.data(), eps, false, z.data());
    be.linear(z.data(), T, post_projection_, nullptr, next.data());
    be.linear(z.data(), T, lm_head_, nullptr, logits.data());
    kernels::Floats centroid_scores;  // [T][num_centroids], before the first download ends the step
    if (c_.use_ordered_embeddings) {
      centroid_scores = be.array<float>(T * c_.num_centroids);
      be.linear(z.data(), T, centroids_, nullptr, centroid_scores.data());
    }
    ForwardResult r;
    r.rows = T;
    for (int64_t i = 0; i < T; ++i) r.first_row.push_back(i);
    r.hidden = be.download(next.data(), T * B);
    r.logits = be.download(logits.data(), T * V);
    if (c_.use_ordered_embeddings)
      mask_to_centroids(be.download(centroid_scores.data(), T * c_.num_centroids), T, r.logits);
    return r;
  }

 private:
  // The target's lending, refused naming what is wrong when it lends none.
  static SharedKvSource lend(const Model& target, const Gemma4AssistantConfig& c) {
    const SharedKvSource* s = target.shared_kv_source();
    if (!s)
      fail(c.source, ": a gemma4_assistant drafts for a Gemma 4 target (it reads the target's "
           "KV cache), but the target's model_type is ", target.config().model_type);
    return *s;
  }

  int64_t kind_head_dim(bool sliding) const {
    const ModelConfig& t = c_.text;
    for (int64_t l = 0; l < t.num_hidden_layers; ++l)
      if (static_cast<bool>(t.sliding_layers[l]) == sliding) return t.head_dim_of(l);
    return t.head_dim;
  }

  // The assistant reads the target's cache, so every shape that cache has must be the one the
  // assistant's config expects.
  void check_geometry(const ModelConfig& target) const {
    const ModelConfig& t = c_.text;
    if (t.vocab_size != target.vocab_size)
      fail(c_.source, ": field \"text_config.vocab_size\" is ", t.vocab_size, " but the target's "
           "vocab_size is ", target.vocab_size);
    if (c_.backbone_hidden_size != target.hidden_size)
      fail(c_.source, ": field \"backbone_hidden_size\" is ", c_.backbone_hidden_size,
           " but the target's hidden_size is ", target.hidden_size);
    for (int64_t l = 0; l < t.num_hidden_layers; ++l) {
      const bool sliding = t.sliding_layers[l];
      const int64_t source = sliding ? src_.sliding_source : src_.full_source;
      const char* kind = sliding ? "sliding_attention" : "full_attention";
      if (source < 0)
        fail(c_.source, ": assistant layer ", l, " is ", kind, " but the target has no ", kind,
             " layer with its own KV to read");
      if (t.head_dim_of(l) != target.head_dim_of(source))
        fail(c_.source, ": field \"", head_dim_field(sliding), "\": assistant layer ", l, " (",
             kind, ") has head_dim ", t.head_dim_of(l), " but the target layer ", source,
             " whose KV it reads has ", target.head_dim_of(source));
      if (t.kv_heads_of(l) != target.kv_heads_of(source))
        fail(c_.source, ": field \"", kv_heads_field(sliding), "\": assistant layer ", l, " (",
             kind, ") expects ", t.kv_heads_of(l), " KV heads but the target layer ", source,
             " whose KV it reads has ", target.kv_heads_of(source));
      if (sliding && t.sliding_window != target.sliding_window)
        fail(c_.source, ": field \"text_config.sliding_window\" is ", t.sliding_window,
             " but the target's sliding_window is ", target.sliding_window);
    }
  }

  AssistantLayer load_layer(const Checkpoint& w, const std::string& lp, int64_t l,
                            kernels::Backend& be) {
    const ModelConfig& t = c_.text;
    const int64_t H = t.hidden_size;
    AssistantLayer L;
    L.input_norm = be.upload(vector_f32(w, lp + "input_layernorm.weight", H));
    L.post_attention_norm = be.upload(vector_f32(w, lp + "post_attention_layernorm.weight", H));
    L.pre_feedforward_norm = be.upload(vector_f32(w, lp + "pre_feedforward_layernorm.weight", H));
    L.post_feedforward_norm = be.upload(vector_f32(w, lp + "post_feedforward_layernorm.weight", H));
    L.layer_scalar = vector_f32(w, lp + "layer_scalar", 1).front();
    L.head_dim = t.head_dim_of(l);
    L.window = t.attention_window(l) > 0 ? t.attention_window(l) + 1 : 0;  // inclusive: see the top
    L.kv_layer = L.window > 0 ? src_.sliding_kv_layer : src_.full_kv_layer;
    const std::string ap = lp + "self_attn.";
    for (const char* absent : {"k_proj.weight", "v_proj.weight", "k_norm.weight"})
      if (w.has(ap + absent))
        fail(w.dir(), ": tensor ", ap, absent, " exists, but every gemma4_assistant layer reads "
             "its target's KV (it has no keys or values of its own)");
    const int64_t qd = t.num_attention_heads * L.head_dim;
    L.q = be.place_column_parallel(matrix(w, ap + "q_proj.weight", qd, H));
    L.o = be.place_row_parallel(matrix(w, ap + "o_proj.weight", H, qd));
    L.q_norm = be.upload(vector_f32(w, ap + "q_norm.weight", L.head_dim));
    L.mlp = load_mlp(w, t, lp + "mlp.", be);
    return L;
  }

  void load_ordered_embedder(const Checkpoint& w, kernels::Backend& be) {
    const int64_t V = c_.text.vocab_size, C = c_.num_centroids;
    centroids_ = be.place(matrix(w, "masked_embedding.centroids.weight", C, c_.text.hidden_size));
    const std::string name = "masked_embedding.token_ordering";
    const TensorInfo& info = w.require(name, {V}, {DType::I64, DType::I32});
    std::vector<bool> seen(V, false);
    token_ordering_.resize(V);
    for (int64_t i = 0; i < V; ++i) {
      int64_t id = 0;
      if (info.dtype == DType::I64) std::memcpy(&id, info.data + 8 * i, 8);
      else {
        int32_t v32 = 0;
        std::memcpy(&v32, info.data + 4 * i, 4);
        id = v32;
      }
      if (id < 0 || id >= V || seen[id])
        fail(w.dir(), ": tensor ", name, " must be a permutation of [0, ", V, "), found ", id,
             " at ", i, id >= 0 && id < V ? " twice" : "");
      seen[id] = true;
      token_ordering_[i] = static_cast<int32_t>(id);
    }
  }

  // transformers' Gemma4AssistantMaskedEmbedder: the k best centroids (ties to the lower index)
  // select vocab / C tokens each, in token_ordering's rows; those keep their lm_head logits (the
  // same dot products), every other token gets the minimum of the selected ones minus 1.
  // scores: [T][num_centroids], the centroid projection of the final-normed rows.
  void mask_to_centroids(const std::vector<float>& scores, int64_t T, std::vector<float>& logits) {
    const int64_t V = c_.text.vocab_size, C = c_.num_centroids, K = V / C;
    std::vector<int32_t> order(C);
    std::vector<float> row(V);
    for (int64_t r = 0; r < T; ++r) {
      const float* s = &scores[r * C];
      for (int64_t i = 0; i < C; ++i) order[i] = static_cast<int32_t>(i);
      std::partial_sort(order.begin(), order.begin() + c_.centroid_top_k, order.end(),
                        [s](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
      float* out = &logits[r * V];
      double lowest = INFINITY;
      std::vector<bool> keep(V, false);
      for (int64_t j = 0; j < c_.centroid_top_k; ++j)
        for (int64_t i = 0; i < K; ++i) {
          const int32_t tok = token_ordering_[order[j] * K + i];
          keep[tok] = true;
          lowest = std::min(lowest, static_cast<double>(out[tok]));
        }
      const float fill = static_cast<float>(lowest - 1.0);
      for (int64_t i = 0; i < V; ++i)
        if (!keep[i]) out[i] = fill;
    }
  }

  void layer_forward(const AssistantLayer& L, float* x, int64_t T,
                     const kernels::AttentionBatch& batch, const float* cos_sin) {
    const ModelConfig& t = c_.text;
    kernels::Backend& be = *src_.backend;
    const int64_t H = t.hidden_size, nh = t.num_attention_heads, hd = L.head_dim;
    const float eps = static_cast<float>(t.rms_norm_eps);
    kernels::Floats h = be.array<float>(T * H), delta = be.array<float>(T * H),
                    q = be.array<float>(T * nh * hd), attn = be.array<float>(T * nh * hd);
    be.rms_norm(x, T, H, L.input_norm.data(), eps, false, h.data());
    be.linear(h.data(), T, L.q, nullptr, q.data());
    be.rms_norm(q.data(), T * nh, hd, L.q_norm.data(), eps, false, q.data());
    be.rope(q.data(), T, nh, hd, hd, cos_sin);
    kernels::AttentionBatch b = batch;
    b.window = L.window;
    be.attention(q.data(), T, b, nh, src_.kv->layer(L.kv_layer), 1.0f, attn.data());
    be.linear(attn.data(), T, L.o, nullptr, delta.data());
    be.rms_norm(delta.data(), T, H, L.post_attention_norm.data(), eps, false, delta.data());
    be.add(x, delta.data(), T * H);
    be.rms_norm(x, T, H, L.pre_feedforward_norm.data(), eps, false, h.data());
    mlp_forward(L.mlp, h.data(), T, delta.data(), be);
    be.rms_norm(delta.data(), T, H, L.post_feedforward_norm.data(), eps, false, delta.data());
    be.add(x, delta.data(), T * H);
    be.scale(x, T * H, L.layer_scalar);
  }

  Gemma4AssistantConfig c_;
  SharedKvSource src_;
  std::unique_ptr<Checkpoint> ckpt_;
  kernels::RopeTable rope_sliding_, rope_full_;
  kernels::Weight pre_projection_, post_projection_, lm_head_, centroids_;
  std::vector<AssistantLayer> layers_;
  kernels::Floats final_norm_;
  std::vector<int32_t> token_ordering_;  // [vocab]: row c * (vocab / C) + i is a token of centroid c
};

}  // namespace

std::unique_ptr<Gemma4Assistant> load_gemma4_assistant(const std::string& dir,
                                                       const Model& target) {
  return std::make_unique<Assistant>(dir, target);
}

}  // namespace lockstep
