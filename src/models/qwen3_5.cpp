// Qwen3.5 / Qwen3-Next forward: embed, then per layer x += mixer(norm(x)); x += mlp(norm(x)),
// where the mixer is Gated DeltaNet (linear_attention) or gated full attention; final norm,
// lm_head. Every RMSNorm here is zero-centred (x * (1 + w)) except the DeltaNet's gated output
// norm (gated_deltanet_layer.cpp).
#include "models/qwen3_5.h"

#include <algorithm>

#include "core/error.h"
#include "models/attention_layer.h"
#include "models/forward_common.h"
#include "models/gated_deltanet_layer.h"
#include "models/hybrid_state.h"
#include "models/moe_layer.h"
#include "models/mtp_head.h"
#include "models/rope_freqs.h"
#include "models/weights.h"

namespace lockstep {

namespace {

struct HybridLayer {
  LayerKind kind = LayerKind::FullAttention;
  int64_t index = 0;  // among layers of its kind: KV layer, or linear-state slot
  kernels::Floats input_norm, post_attention_norm;
  AttentionWeights attn;
  DeltaNetWeights deltanet;
  FeedForward mlp;  // dense, or routed experts (qwen3_5_moe_text, sparse qwen3_next layers)
};

int64_t count_layers(const ModelConfig& c, LayerKind kind) {
  int64_t n = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) n += c.layer_kind(l) == kind;
  return n;
}

class HybridModel final : public Model {
 public:
  HybridModel(const ModelConfig& c, const std::string& dir, const ModelOptions& o)
      : config_(c),
        ckpt_(Checkpoint::open(dir)),
        quantize_(quantize_on_load(*ckpt_, o)),
        be_(kernels::make_backend(o.device, o.pool)),
        kv_(count_layers(c, LayerKind::FullAttention), c.num_key_value_heads, c.head_dim,
            o.kv_block_tokens, o.kv_capacity_tokens, be_.get()),
        rope_(make_rope_table(c)),
        dims_(deltanet_dims(c)) {
    if (!c.attn_output_gate)
      fail(c.source, ": field \"attn_output_gate\" is false: ", c.model_type, "'s full-attention "
           "layers without the output gate are not supported (every published checkpoint has it)");
    if (!c.zero_centered_norm || !c.qk_norm)
      fail(c.source, ": ", c.model_type, " expects zero-centred norms and q/k norm");
    const Checkpoint& w = *ckpt_;
    kernels::Backend& be = *be_;
    const std::string& p = c.weight_prefix;
    const int64_t H = c.hidden_size;
    // Tied, the table is the lm_head's weight too; else it is only looked up.
    const bool tied = c.tie_word_embeddings && !w.has("lm_head.weight");
    const kernels::Weight embed = matrix(w, p + "embed_tokens.weight", c.vocab_size, H);
    embed_ = tied ? be.place_column_parallel(embed) : be.place_table(embed);
    int64_t n_full = 0;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string lp = p + "layers." + std::to_string(l) + ".";
      HybridLayer layer;
      layer.kind = c.layer_kind(l);
      layer.input_norm = be.upload(vector_f32(w, lp + "input_layernorm.weight", H));
      layer.post_attention_norm =
          be.upload(vector_f32(w, lp + "post_attention_layernorm.weight", H));
      if (layer.kind == LayerKind::FullAttention) {
        layer.index = n_full++;
        layer.attn = load_attention(w, c, lp + "self_attn.", be);
      } else {
        layer.index = n_linear_++;
        layer.deltanet = load_deltanet(w, c, lp + "linear_attn.", be);
      }
      layer.mlp = load_feed_forward(w, c, lp + "mlp.", c.layer_is_moe(l), be);
      layers_.push_back(std::move(layer));
    }
    final_norm_ = be.upload(vector_f32(w, p + "norm.weight", H));
    lm_head_ = tied ? embed_
                     : be.place_column_parallel(matrix(w, "lm_head.weight", c.vocab_size, H));
    mtp_ = load_mtp_head(w, {&config_, embed_, lm_head_, &rope_, &be}, o);
  }

  const ModelConfig& config() const override { return config_; }
  kernels::Device device() const override { return be_->device(); }
  const KvPool& kv_pool() const override { return kv_; }
  KvPool& kv_pool() override { return kv_; }
  MtpDrafter* mtp() override { return mtp_.get(); }

  size_t state_bytes_per_sequence() const override {
    return static_cast<size_t>(n_linear_) *
           static_cast<size_t>(dims_.conv_state_floats() + dims_.delta_state_floats()) *
           sizeof(float);
  }

  std::unique_ptr<SequenceState> new_sequence() override {
    auto seq = std::make_unique<SequenceState>(&kv_);
    auto st = std::make_unique<HybridState>(be_.get());
    for (int64_t i = 0; i < n_linear_; ++i) st->layers.push_back(DeltaNetState::zeros(dims_, *be_));
    seq->recurrent = std::move(st);
    return seq;
  }

  void truncate(SequenceState& seq, int64_t length) override {
    HybridState& st = state_of(seq);
    if (length < 0 || length > seq.length)
      fail("truncate: length ", length, " outside [0, ", seq.length, "]");
    if (st.tokens != length) {
      // Go back through the log: restore the floor state and replay the kept tokens.
      if (!st.has_floor || length < st.floor_tokens || length > st.tokens)
        fail("truncate: length ", length, " is below the rollback floor ", seq.rollback_floor,
             " (a recurrent model can only go back inside its last keep_rollback forward, or "
             "to the length of a restored snapshot)");
      const int64_t n = length - st.floor_tokens;
      for (size_t l = 0; l < st.layers.size(); ++l)  // the floor stays, for another truncate
        st.layers[l].assign(st.floor[l], *be_);
      for (const HybridLayer& L : layers_) {
        if (L.kind != LayerKind::LinearAttention) continue;
        deltanet_replay(L.deltanet, dims_, st.layers[L.index], st.log[L.index].data(), n, *be_);
      }
      st.tokens = length;
    }
    seq.length = length;
    seq.rollback_floor = st.has_floor ? st.floor_tokens : length;
    kv_.truncate(seq.kv_blocks, length);  // going back into a shared block un-shares it
  }

  ForwardResult forward(std::span<const ForwardItem> items) override {
    const ModelConfig& c = config_;
    const int64_t H = c.hidden_size, TI = dims_.token_inputs();
    kernels::Backend& be = *be_;
    // Rollback buffers are sized before the step begins: an array allocated inside a recorded
    // step dies with it. (A null or foreign sequence fails below, in flatten_batch / state_of.)
    for (const ForwardItem& it : items)
      if (it.keep_rollback && it.seq && dynamic_cast<HybridState*>(it.seq->recurrent.get()))
        state_of(*it.seq).reserve_rollback(dims_, static_cast<int64_t>(it.tokens.size()));
    // Recorded (CUDA graph) like any small step; flatten_batch validates ids before any state
    // changes.
    // MoE layers that route on the host read router logits back mid-forward, so such a step is
    // never recorded; layers whose experts run on the device (moe_layer.h) read nothing back.
    const int64_t limit = layers_record_limit(layers_, kRecordedMaxTokens);
    const std::string key = limit > 0 ? graph_key("hybrid", items, c.vocab_size, limit) : "";
    RecordedStep step(be, key);
    FlatBatch b = flatten_batch(items, kv_, rope_, c.max_position_embeddings, c.vocab_size, be,
                                !key.empty());
    const int64_t T = static_cast<int64_t>(b.tokens.size());
    const float eps = static_cast<float>(c.rms_norm_eps);
    kernels::Floats x = be.array<float>(T * H), h = be.array<float>(T * H),
                    delta = be.array<float>(T * H);
    be.embedding(embed_, b.device_tokens.data(), T, x.data());

    // Rollback bookkeeping first: an item that asks for it keeps its state at the current length
    // (the new floor) and logs its tokens' recurrent inputs, both copied into its rollback buffers
    // layer by layer below; any other item moves its floor to its new end (its buffers stay).
    for (const ForwardItem& it : items)
      if (state_of(*it.seq).tokens != it.seq->length)
        fail("forward: the recurrent state reflects ", state_of(*it.seq).tokens,
             " tokens but the sequence has ", it.seq->length,
             " (after restoring a snapshot, truncate to its length)");
    std::vector<HybridState*> states;
    for (const ForwardItem& it : items) {
      HybridState& st = state_of(*it.seq);
      states.push_back(&st);
      const int64_t n = static_cast<int64_t>(it.tokens.size());
      if (it.keep_rollback) {
        st.has_floor = true;
        st.floor_tokens = st.tokens;
        it.seq->rollback_floor = it.seq->length;
      } else {
        st.has_floor = false;
        it.seq->rollback_floor = it.seq->length + n;
      }
      st.tokens += n;
    }

    kernels::Floats inputs = be.array<float>(T * TI), z = be.array<float>(T * dims_.value_dim());
    // Every linear layer's spans, uploaded once: [linear layer][item].
    const int64_t n_items = static_cast<int64_t>(items.size());
    std::vector<kernels::DeltaNetSpan> host_spans;
    int64_t longest = 0;
    for (int64_t l = 0; l < n_linear_; ++l)
      for (int64_t i = 0; i < n_items; ++i) {
        DeltaNetState& s = states[i]->layers[l];
        const int64_t n = static_cast<int64_t>(items[i].tokens.size());
        host_spans.push_back({s.conv.data(), s.delta.data(),
                              static_cast<int32_t>(b.item_first[i]), static_cast<int32_t>(n)});
        longest = std::max(longest, n);
      }
    const kernels::DeviceArray<kernels::DeltaNetSpan> spans = be.upload(host_spans);
    // Per linear layer, for each item that keeps rollback data: its conv and delta state into its
    // floor (before the layer's step advances them) and its rows of the layer's recurrent inputs
    // into its log. One table, [linear layer][3 per such item], uploaded like the spans: the
    // per-sequence addresses are data, so a replayed graph copies into the buffers of whichever
    // sequences this batch holds.
    constexpr int64_t F = sizeof(float);
    std::vector<kernels::CopySpan> host_copies;
    int64_t copy_bytes = 0;
    for (int64_t l = 0; l < n_linear_; ++l)
      for (int64_t i = 0; i < n_items; ++i) {
        if (!items[i].keep_rollback) continue;
        DeltaNetState &s = states[i]->layers[l], &f = states[i]->floor[l];
        const int64_t n = static_cast<int64_t>(items[i].tokens.size());
        const float* logged = inputs.data() + b.item_first[i] * TI;
        host_copies.push_back({f.conv.data(), s.conv.data(), s.conv.size() * F});
        host_copies.push_back({f.delta.data(), s.delta.data(), s.delta.size() * F});
        host_copies.push_back({states[i]->log[l].data(), logged, n * TI * F});
        copy_bytes = std::max({copy_bytes, s.conv.size() * F, s.delta.size() * F, n * TI * F});
      }
    const int64_t per_layer =
        n_linear_ > 0 ? static_cast<int64_t>(host_copies.size()) / n_linear_ : 0;
    const kernels::DeviceArray<kernels::CopySpan> copies = be.upload(host_copies);
    // Each residual add is fused with the norm that reads its x (add_rms_norm: the same bits as
    // add then rms_norm); the last layer's MLP residual is a plain add.
    for (const HybridLayer& L : layers_) {
      if (&L == &layers_.front())
        be.rms_norm(x.data(), T, H, L.input_norm.data(), eps, true, h.data());
      else
        be.add_rms_norm(x.data(), delta.data(), T, H, L.input_norm.data(), eps, true, h.data());
      if (L.kind == LayerKind::FullAttention) {
        attention_forward(L.attn, c, h.data(), T, b.rows, kv_, L.index, delta.data(), be);
      } else {
        deltanet_project(L.deltanet, dims_, h.data(), T, inputs.data(), z.data(), be);
        if (per_layer > 0)
          be.copy_spans(copies.data() + L.index * per_layer, per_layer, copy_bytes);
        deltanet_mix(L.deltanet, dims_, inputs.data(), z.data(), T,
                     spans.data() + L.index * n_items, n_items, longest, eps, delta.data(), be);
      }
      be.add_rms_norm(x.data(), delta.data(), T, H, L.post_attention_norm.data(), eps, true,
                      h.data());
      feed_forward(L.mlp, h.data(), T, delta.data(), be);
    }
    if (!layers_.empty()) be.add(x.data(), delta.data(), T * H);
    return finish_forward(items, b, x.data(), H, {&final_norm_, lm_head_, eps, true}, be);
  }

 private:
  static HybridState& state_of(SequenceState& seq) {
    auto* st = dynamic_cast<HybridState*>(seq.recurrent.get());
    if (!st) fail("hybrid model: sequence was not created by this model");
    return *st;
  }

  ModelConfig config_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<QuantizeOnLoad> quantize_;  // --quantize: owns the quantized codes
  std::unique_ptr<kernels::Backend> be_;       // before everything that lives in its memory
  KvPool kv_;
  kernels::RopeTable rope_;
  DeltaNetDims dims_;
  int64_t n_linear_ = 0;
  kernels::Weight embed_, lm_head_;
  std::vector<HybridLayer> layers_;
  kernels::Floats final_norm_;
  std::unique_ptr<MtpDrafter> mtp_;
};

}  // namespace

std::unique_ptr<Model> load_qwen3_5_model(const ModelConfig& config, const std::string& dir,
                                          const ModelOptions& options) {
  return std::make_unique<HybridModel>(config, dir, options);
}

}  // namespace lockstep
