// Gemma 4 text config -> ModelConfig, with transformers 5.17's Gemma4TextConfig defaults (a
// config.json omits whatever equals them). Every field that changes the math is read here or
// refused naming it; what transformers itself never reads for gemma4_text (e.g.
// query_pre_attn_scalar: Gemma 4 does not scale its scores) is ignored as transformers does.
#include <algorithm>

#include "models/config_fields.h"

namespace lockstep::config_detail {

namespace {

const char* const kSliding = "sliding_attention";
const char* const kFull = "full_attention";

// Layer kinds: layer_types, or Gemma 4's default of one full layer in six; the last layer is
// full either way (transformers forces it, with a warning, when a config says otherwise).
void parse_layer_types(const Fields& f, const json& obj, ModelConfig& c) {
  const std::vector<size_t> kinds = layer_kinds(f, obj, c.num_hidden_layers, {kSliding, kFull});
  c.sliding_layers.clear();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    c.sliding_layers.push_back(kinds.empty() ? (i + 1) % 6 != 0 : kinds[i] == 0);
  c.sliding_layers.back() = false;
  if (!f.has("sliding_window") && obj.contains("sliding_window"))
    fail(f.source(), ": field \"", f.name("sliding_window"), "\" is null; Gemma 4's sliding "
         "layers need a window");
  c.sliding_window = f.integer("sliding_window", 512);
  if (c.sliding_window <= 0)
    fail(f.source(), ": field \"", f.name("sliding_window"), "\" must be positive, found ",
         c.sliding_window);
}

// rope_parameters keyed by layer type. Gemma4TextRotaryEmbedding computes "default" itself
// (the whole head, partial_rotary_factor unread) and takes "proportional" from transformers'
// RoPE table; any other type is refused here.
void parse_rope(const Fields& f, const json& obj, ModelConfig& c) {
  ModelConfig::Gemma4& g = c.gemma4;
  g.sliding_rope = {"default", 10000.0, 1.0, 1.0};
  g.full_rope = {"proportional", 1000000.0, 0.25, 1.0};
  if (f.has("rope_scaling"))
    fail(f.source(), ": field \"", f.name("rope_scaling"), "\" is set; Gemma 4 reads RoPE from "
         "rope_parameters (keyed by layer type) only");
  if (!f.has("rope_parameters")) return;
  const json& rp = obj["rope_parameters"];
  const std::string rp_name = f.name("rope_parameters");
  if (!rp.is_object())
    fail(f.source(), ": field \"", rp_name, "\" must be an object, found ", rp.dump());
  for (auto it = rp.begin(); it != rp.end(); ++it)
    if (it.key() != kFull && it.key() != kSliding)
      fail(f.source(), ": field \"", rp_name, "\": unexpected key \"", it.key(),
           "\" (Gemma 4 keys RoPE by layer type: full_attention, sliding_attention)");
  auto entry = [&](const char* type, ModelConfig::Gemma4::Rope& r) {
    if (!rp.contains(type) || !rp[type].is_object())
      fail(f.source(), ": field \"", rp_name, ".", type, "\" must be an object (transformers "
           "needs one entry per layer type), found ", rp.contains(type) ? rp[type].dump() : "none");
    Fields p(rp[type], f.source(), rp_name + "." + type + ".");
    r.type = p.string("rope_type", p.string("type", "default"));
    if (r.type != "default" && r.type != "proportional")
      fail(f.source(), ": field \"", p.name("rope_type"), "\": rope type \"", r.type,
           "\" is not supported for Gemma 4 (supported: default, proportional)");
    if (!p.has("rope_theta"))
      fail(f.source(), ": required field \"", p.name("rope_theta"), "\" is missing");
    r.theta = p.number("rope_theta", 0);
    r.partial_rotary_factor =
        r.type == "proportional" ? p.number("partial_rotary_factor", 1.0) : 1.0;
    r.factor = r.type == "proportional" ? p.number("factor", 1.0) : 1.0;
    if (!(r.theta > 0) || !(r.factor > 0) ||
        !(r.partial_rotary_factor >= 0 && r.partial_rotary_factor <= 1))
      fail(f.source(), ": field \"", rp_name, ".", type, "\": rope_theta and factor must be "
           "positive and partial_rotary_factor in [0, 1], found ", rp[type].dump());
  };
  entry(kSliding, g.sliding_rope);
  entry(kFull, g.full_rope);
}

// Attention shape per layer. transformers 5.17 resolves them into per_layer_config (which it
// writes, keyed by layer index); published configs carry global_head_dim (default 512) and
// num_global_key_value_heads (full layers' KV heads, applied only with attention_k_eq_v)
// instead, which it turns into the same per-layer overrides of the full layers.
void parse_layer_shapes(const Fields& f, const json& obj, ModelConfig& c) {
  const int64_t L = c.num_hidden_layers;
  c.layer_head_dims.assign(L, c.head_dim);
  c.layer_kv_heads.assign(L, c.num_key_value_heads);
  if (f.has("per_layer_config")) {
    const json& pl = obj["per_layer_config"];
    const std::string name = f.name("per_layer_config");
    if (!pl.is_object())
      fail(f.source(), ": field \"", name, "\" must be an object keyed by layer index, found ",
           pl.dump());
    for (auto it = pl.begin(); it != pl.end(); ++it) {
      int64_t l = -1;
      try {
        size_t used = 0;
        l = std::stoll(it.key(), &used);
        if (used != it.key().size()) l = -1;
      } catch (const std::exception&) {
      }
      if (l < 0 || l >= L)
        fail(f.source(), ": field \"", name, "\": key \"", it.key(), "\" is not a layer index in "
             "[0, ", L, ")");
      if (!it.value().is_object())
        fail(f.source(), ": field \"", name, ".", it.key(), "\" must be an object");
      Fields o(it.value(), f.source(), name + "." + it.key() + ".");
      for (auto kv = it.value().begin(); kv != it.value().end(); ++kv)
        if (kv.key() != "head_dim" && kv.key() != "num_key_value_heads")
          fail(f.source(), ": field \"", o.name(kv.key().c_str()), "\" is not supported (a layer "
               "may override head_dim and num_key_value_heads only)");
      c.layer_head_dims[l] = o.integer("head_dim", c.head_dim);
      c.layer_kv_heads[l] = o.integer("num_key_value_heads", c.num_key_value_heads);
    }
  } else {
    const int64_t global_head_dim = f.integer("global_head_dim", 512);
    const int64_t global_kv = c.gemma4.k_eq_v ? f.integer("num_global_key_value_heads", 0) : 0;
    for (int64_t l = 0; l < L; ++l) {
      if (c.sliding_layers[l]) continue;
      c.layer_head_dims[l] = global_head_dim;
      if (global_kv > 0) c.layer_kv_heads[l] = global_kv;
    }
  }
  // The full layers share one RoPE table, so one head dim; likewise the sliding layers.
  for (int64_t l = 0; l < L; ++l) {
    if (c.layer_head_dims[l] <= 0 || c.layer_head_dims[l] % 2 != 0)
      fail(f.source(), ": layer ", l, "'s head_dim must be positive and even, found ",
           c.layer_head_dims[l]);
    const int64_t kv = c.layer_kv_heads[l];
    if (kv <= 0 || c.num_attention_heads % kv != 0)
      fail(f.source(), ": layer ", l, "'s num_key_value_heads (", kv, ") must divide \"",
           f.name("num_attention_heads"), "\" (", c.num_attention_heads, ")");
    for (int64_t m = 0; m < l; ++m)
      if (c.sliding_layers[m] == c.sliding_layers[l] && c.layer_head_dims[m] != c.layer_head_dims[l])
        fail(f.source(), ": layers ", m, " and ", l, " are both ",
             c.sliding_layers[l] ? kSliding : kFull, " but have head_dim ", c.layer_head_dims[m],
             " and ", c.layer_head_dims[l], " (one RoPE table per layer type)");
  }
}

// num_kv_shared_layers: the last n layers read the KV cache of the last earlier layer of their
// own type (transformers' store_full_length_kv layer) and have no k/v projections.
void parse_kv_sharing(const Fields& f, ModelConfig& c) {
  ModelConfig::Gemma4& g = c.gemma4;
  const int64_t L = c.num_hidden_layers;
  g.kv_shared_layers = f.integer("num_kv_shared_layers", 0);
  if (g.kv_shared_layers < 0 || g.kv_shared_layers >= L)
    fail(f.source(), ": field \"", f.name("num_kv_shared_layers"), "\" must be in [0, ", L,
         ") (num_hidden_layers), found ", g.kv_shared_layers);
  const int64_t first_shared = L - g.kv_shared_layers;
  g.kv_source.resize(L);
  for (int64_t l = 0; l < L; ++l) {
    g.kv_source[l] = l;
    if (l < first_shared) continue;
    g.kv_source[l] = -1;
    for (int64_t m = first_shared - 1; m >= 0 && g.kv_source[l] < 0; --m)
      if (c.sliding_layers[m] == c.sliding_layers[l]) g.kv_source[l] = m;
    if (g.kv_source[l] < 0)
      fail(f.source(), ": field \"", f.name("num_kv_shared_layers"), "\": layer ", l, " (",
           c.sliding_layers[l] ? kSliding : kFull, ") shares the KV of an earlier layer of its "
           "type, but none of layers 0..", first_shared - 1, " is one");
    if (c.layer_head_dims[l] != c.layer_head_dims[g.kv_source[l]] ||
        c.layer_kv_heads[l] != c.layer_kv_heads[g.kv_source[l]])
      fail(f.source(), ": layer ", l, " shares layer ", g.kv_source[l], "'s KV but their "
           "head_dim / num_key_value_heads differ");
  }
}

void parse_moe_block(const Fields& f, ModelConfig& c) {
  ModelConfig::Gemma4& g = c.gemma4;
  g.moe_block = f.boolean("enable_moe_block", false);
  if (!g.moe_block) return;
  for (const char* key : {"num_experts", "top_k_experts", "moe_intermediate_size"})
    if (!f.has(key) || f.integer(key) <= 0)
      fail(f.source(), ": field \"", f.name(key), "\" must be a positive integer when \"",
           f.name("enable_moe_block"), "\" is true");
  c.num_experts = f.integer("num_experts");
  c.num_experts_per_tok = f.integer("top_k_experts");
  c.moe_intermediate_size = f.integer("moe_intermediate_size");
  c.norm_topk_prob = true;  // Gemma4TextRouter always renormalises the k weights
  c.decoder_sparse_step = 1;
  if (c.num_experts_per_tok > c.num_experts)
    fail(f.source(), ": field \"", f.name("top_k_experts"), "\" (", c.num_experts_per_tok,
         ") exceeds \"", f.name("num_experts"), "\" (", c.num_experts, ")");
}

}  // namespace

void parse_gemma4(const Fields& top, const Fields& f, const json& obj, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 262144);
  c.hidden_size = f.integer("hidden_size", 2304);
  c.intermediate_size = f.integer("intermediate_size", 9216);
  c.num_hidden_layers = f.integer("num_hidden_layers", 30);
  c.num_attention_heads = f.integer("num_attention_heads", 8);
  c.num_key_value_heads = f.integer("num_key_value_heads", 4);
  c.head_dim = f.integer("head_dim", 256);
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "num_key_value_heads", "head_dim"})
    if (f.integer(key, 1) <= 0) fail(f.source(), ": field \"", f.name(key), "\" must be positive");
  c.max_position_embeddings = f.integer("max_position_embeddings", 131072);
  c.rms_norm_eps = f.number("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = top.boolean("tie_word_embeddings", f.boolean("tie_word_embeddings", true));
  c.qk_norm = true;
  c.zero_centered_norm = false;  // Gemma4RMSNorm: x_normed * w
  c.partial_rotary_factor = 1.0;
  c.final_logit_softcapping = f.number("final_logit_softcapping", 0.0);
  if (f.has("final_logit_softcapping") && !(c.final_logit_softcapping > 0))
    fail(f.source(), ": field \"", f.name("final_logit_softcapping"),
         "\" must be positive or null, found ", c.final_logit_softcapping);
  if (f.boolean("attention_bias", false))
    fail(f.source(), ": field \"", f.name("attention_bias"), "\" is true: Gemma 4 attention "
         "biases are not supported (published Gemma 4 checkpoints have none)");
  const std::string bidirectional = f.string("use_bidirectional_attention", "");
  if (bidirectional == "all")
    fail(f.source(), ": field \"", f.name("use_bidirectional_attention"), "\" is \"all\": "
         "bidirectional (encoder) attention is not supported");
  if (!bidirectional.empty() && bidirectional != "vision")
    fail(f.source(), ": field \"", f.name("use_bidirectional_attention"), "\" is \"",
         bidirectional, "\" (expected null, \"vision\" or \"all\")");
  c.hidden_activation = f.string("hidden_activation", "gelu_pytorch_tanh");
  if (c.hidden_activation != "gelu_pytorch_tanh" && c.hidden_activation != "gelu_new")
    fail(f.source(), ": field \"", f.name("hidden_activation"), "\" is \"", c.hidden_activation,
         "\"; lockstep's gemma4 implements gelu_pytorch_tanh (and gelu_new, the same formula)");
  c.hidden_activation = "gelu_pytorch_tanh";
  c.torch_dtype = f.string("torch_dtype", f.string("dtype", top.string("torch_dtype", "float32")));

  ModelConfig::Gemma4& g = c.gemma4;
  g.k_eq_v = f.boolean("attention_k_eq_v", false);
  g.double_wide_mlp = f.boolean("use_double_wide_mlp", false);
  g.per_layer_input_size = f.integer("hidden_size_per_layer_input", 256);
  g.per_layer_vocab = f.integer("vocab_size_per_layer_input", 262144);
  if (g.per_layer_input_size < 0)
    fail(f.source(), ": field \"", f.name("hidden_size_per_layer_input"), "\" must be >= 0");
  if (g.per_layer_input_size > 0 && g.per_layer_vocab < c.vocab_size)
    fail(f.source(), ": field \"", f.name("vocab_size_per_layer_input"), "\" (", g.per_layer_vocab,
         ") is smaller than vocab_size (", c.vocab_size, "): some tokens would have no per-layer "
         "input");
  parse_layer_types(f, obj, c);
  parse_rope(f, obj, c);
  parse_layer_shapes(f, obj, c);
  parse_kv_sharing(f, c);
  parse_moe_block(f, c);
}

}  // namespace lockstep::config_detail
