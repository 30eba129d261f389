// config.json -> ModelConfig. Defaults follow transformers' configuration classes for each
// model_type, because a checkpoint's config.json omits whatever equals the class default; a
// different default here would silently load a different model.
#include "models/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "models/config_fields.h"

namespace lockstep {

namespace config_detail {

// int, list of ints, or null (no ids).
std::vector<int32_t> token_ids(const Fields& f, const char* key) {
  if (!f.has(key)) return {};
  const json& v = f.raw(key);
  std::vector<int32_t> out;
  if (v.is_number_integer()) {
    out.push_back(v.get<int32_t>());
  } else if (v.is_array()) {
    for (const json& e : v) {
      if (!e.is_number_integer())
        fail(f.source(), ": field \"", f.name(key), "\" must be an integer or a list of integers, "
             "found ", v.dump());
      out.push_back(e.get<int32_t>());
    }
  } else {
    fail(f.source(), ": field \"", f.name(key), "\" must be an integer or a list of integers, found ",
         v.dump());
  }
  return out;
}

// Reads scaling fields shared by the legacy "rope_scaling" object and the newer "rope_parameters".
void parse_scaling(const Fields& s, const std::string& type, ModelConfig& c) {
  RopeScaling& r = c.rope_scaling;
  r.type = type;
  if (type == "default" || type == "mrope") {
    // mrope with identical position ids for every section (text only) is plain RoPE.
    r.type = "default";
    return;
  }
  if (type != "linear" && type != "llama3" && type != "yarn")
    fail(s.source(), ": field \"", s.name("rope_type"), "\": rope type \"", type,
         "\" is not supported (supported: default, linear, llama3, yarn)");
  if (!s.has("factor")) fail(s.source(), ": required field \"", s.name("factor"), "\" is missing");
  r.factor = s.number("factor", 1.0);
  if (type == "llama3") {
    r.low_freq_factor = s.number("low_freq_factor", 1.0);
    r.high_freq_factor = s.number("high_freq_factor", 4.0);
    r.original_max_position_embeddings = s.positive("original_max_position_embeddings");
  } else if (type == "yarn") {
    // transformers falls back to max_position_embeddings when the original length is absent.
    r.original_max_position_embeddings =
        s.integer("original_max_position_embeddings", c.max_position_embeddings);
    r.beta_fast = s.number("beta_fast", 32.0);
    r.beta_slow = s.number("beta_slow", 1.0);
    r.attention_factor = s.number("attention_factor", 0.0);
    r.truncate = s.boolean("truncate", true);
  }
}

// layer_types, when present: one of `kinds` per layer (index into kinds per layer). Absent: empty.
std::vector<size_t> layer_kinds(const Fields& f, const json& obj, int64_t layers,
                                std::initializer_list<const char*> kinds) {
  std::vector<size_t> out;
  if (!f.has("layer_types")) return out;
  const json& lt = obj["layer_types"];
  if (!lt.is_array() || static_cast<int64_t>(lt.size()) != layers)
    fail(f.source(), ": field \"", f.name("layer_types"), "\" must be a list of ", layers,
         " layer types, found ", lt.dump());
  std::string expected;
  for (const char* k : kinds) expected += (expected.empty() ? "" : " or ") + std::string(k);
  for (const json& t : lt) {
    const std::string s = t.is_string() ? t.get<std::string>() : t.dump();
    size_t i = 0;
    for (const char* k : kinds) {
      if (s == k) break;
      ++i;
    }
    if (i == kinds.size())
      fail(f.source(), ": field \"", f.name("layer_types"), "\": unknown layer type \"", s,
           "\" (expected ", expected, ")");
    out.push_back(i);
  }
  return out;
}

}  // namespace config_detail

namespace {

using namespace config_detail;

constexpr const char* kSupported =
    "llama, mistral, qwen2, qwen3, qwen3_moe, qwen3_5, qwen3_5_text, qwen3_5_moe, qwen3_5_moe_text, qwen3_next, "
    "gemma3, gemma3_text, gemma4, gemma4_text";



void parse_rope(const Fields& f, const json& obj, ModelConfig& c) {
  if (f.has("partial_rotary_factor")) c.partial_rotary_factor = f.number("partial_rotary_factor", 1);
  if (f.has("rope_parameters")) {
    const json& rp = obj["rope_parameters"];
    if (!rp.is_object())
      fail(f.source(), ": field \"", f.name("rope_parameters"), "\" must be an object, found ",
           rp.dump());
    Fields p(rp, f.source(), f.name("rope_parameters") + ".");
    c.rope_theta = p.number("rope_theta", f.number("rope_theta", c.rope_theta));
    c.partial_rotary_factor = p.number("partial_rotary_factor", c.partial_rotary_factor);
    parse_scaling(p, p.string("rope_type", p.string("type", "default")), c);
    return;
  }
  c.rope_theta = f.number("rope_theta", c.rope_theta);
  if (!f.has("rope_scaling")) return;
  const json& rs = obj["rope_scaling"];
  if (!rs.is_object())
    fail(f.source(), ": field \"", f.name("rope_scaling"), "\" must be an object or null, found ",
         rs.dump());
  Fields s(rs, f.source(), f.name("rope_scaling") + ".");
  parse_scaling(s, s.string("rope_type", s.string("type", "default")), c);
}


void parse_hybrid(const Fields& f, const json& obj, ModelConfig& c) {
  c.zero_centered_norm = true;
  c.attn_output_gate = f.boolean("attn_output_gate", true);
  c.linear_conv_kernel_dim = f.integer("linear_conv_kernel_dim", 4);
  c.linear_key_head_dim = f.integer("linear_key_head_dim", 128);
  c.linear_value_head_dim = f.integer("linear_value_head_dim", 128);
  c.linear_num_key_heads = f.integer("linear_num_key_heads", 16);
  c.linear_num_value_heads = f.integer("linear_num_value_heads", 32);
  c.mtp_num_hidden_layers = f.integer("mtp_num_hidden_layers", 0);
  if (c.linear_num_key_heads <= 0 || c.linear_num_value_heads % c.linear_num_key_heads != 0)
    fail(f.source(), ": field \"", f.name("linear_num_value_heads"), "\" (",
         c.linear_num_value_heads, ") must be a multiple of \"", f.name("linear_num_key_heads"),
         "\" (", c.linear_num_key_heads, ")");
  if (c.linear_conv_kernel_dim < 1)
    fail(f.source(), ": field \"", f.name("linear_conv_kernel_dim"), "\" must be positive");

  c.layer_types.clear();
  const std::vector<size_t> kinds =
      layer_kinds(f, obj, c.num_hidden_layers, {"full_attention", "linear_attention"});
  if (!kinds.empty()) {
    for (size_t k : kinds)
      c.layer_types.push_back(k == 0 ? LayerKind::FullAttention : LayerKind::LinearAttention);
  } else {
    int64_t n = f.integer("full_attention_interval", 4);
    if (n <= 0) fail(f.source(), ": field \"", f.name("full_attention_interval"), "\" must be > 0");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      c.layer_types.push_back((i + 1) % n == 0 ? LayerKind::FullAttention
                                               : LayerKind::LinearAttention);
  }
}

// A list of layer indices (mlp_only_layers); each must name a layer.
std::vector<int64_t> layer_list(const Fields& f, const json& obj, const char* key, int64_t layers) {
  std::vector<int64_t> out;
  if (!f.has(key)) return out;
  const json& v = obj[key];
  if (!v.is_array())
    fail(f.source(), ": field \"", f.name(key), "\" must be a list of layer indices, found ", v.dump());
  for (const json& e : v) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= layers)
      fail(f.source(), ": field \"", f.name(key), "\": ", e.dump(), " is not a layer index in [0, ",
           layers, ")");
    out.push_back(e.get<int64_t>());
  }
  return out;
}

// The routed experts of qwen3_moe, qwen3_5_moe_text and qwen3_next, with each family's class
// defaults (transformers 5.17: Qwen3MoeConfig 128 experts / top 8 / 768, norm_topk_prob false;
// Qwen3NextConfig 512 / 10 / 512, shared 512, norm_topk_prob true; Qwen3_5MoeTextConfig 256 / 8 /
// 512, shared 512, and its router always renormalises, every layer sparse).
void parse_moe(const Fields& f, const json& obj, ModelConfig& c) {
  const std::string& t = c.model_type;
  if (t != "qwen3_moe" && t != "qwen3_5_moe_text" && t != "qwen3_next") {
    // transformers' dense classes have no experts; a config that lists some is another model.
    if (f.integer("num_experts", 0) > 0 || f.integer("num_local_experts", 0) > 0)
      fail(f.source(), ": field \"", f.name("num_experts"), "\" is set, but model_type ", t,
           " is dense (the mixture-of-experts families are qwen3_moe, qwen3_5_moe_text / "
           "qwen3_5_moe and qwen3_next)");
    return;
  }
  const bool q35 = t == "qwen3_5_moe_text", next = t == "qwen3_next";
  const int64_t def_experts = q35 ? 256 : next ? 512 : 128;
  // transformers writes Qwen3-MoE's count as num_local_experts (its attribute map); published
  // configs say num_experts.
  c.num_experts = f.has("num_experts") ? f.integer("num_experts")
                                       : f.integer("num_local_experts", def_experts);
  if (c.num_experts < 0)
    fail(f.source(), ": field \"", f.name("num_experts"), "\" must be >= 0, found ", c.num_experts);
  if (q35) {
    c.decoder_sparse_step = 1;
    c.norm_topk_prob = true;
  } else {
    c.decoder_sparse_step = f.integer("decoder_sparse_step", 1);
    c.norm_topk_prob = f.boolean("norm_topk_prob", next);
    c.mlp_only_layers = layer_list(f, obj, "mlp_only_layers", c.num_hidden_layers);
    if (c.decoder_sparse_step < 1)
      fail(f.source(), ": field \"", f.name("decoder_sparse_step"), "\" must be >= 1, found ",
           c.decoder_sparse_step);
  }
  if (!c.has_moe()) {
    c.num_experts = 0;  // every layer dense: nothing below is read
    return;
  }
  c.num_experts_per_tok = f.integer("num_experts_per_tok", q35 ? 8 : next ? 10 : 8);
  c.moe_intermediate_size = f.integer("moe_intermediate_size", next || q35 ? 512 : 768);
  if (t != "qwen3_moe")
    c.shared_expert_intermediate_size = f.integer("shared_expert_intermediate_size", 512);
  if (c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts)
    fail(f.source(), ": field \"", f.name("num_experts_per_tok"), "\" must be in [1, ",
         c.num_experts, "] (num_experts), found ", c.num_experts_per_tok);
  if (c.moe_intermediate_size <= 0)
    fail(f.source(), ": field \"", f.name("moe_intermediate_size"), "\" must be positive, found ",
         c.moe_intermediate_size);
  if (c.shared_expert_intermediate_size < 0)
    fail(f.source(), ": field \"", f.name("shared_expert_intermediate_size"),
         "\" must be >= 0, found ", c.shared_expert_intermediate_size);
}

// Mistral: every layer attends to the last sliding_window positions (MistralConfig's default is
// 4096 when the key is absent; null, as Mistral 7B v0.3 and Nemo write, means full attention).
void parse_mistral_window(const Fields& f, const json& obj, ModelConfig& c) {
  const bool null_window = obj.contains("sliding_window") && obj["sliding_window"].is_null();
  c.sliding_window = null_window ? 0 : f.integer("sliding_window", 4096);
  if (c.sliding_window < 0)
    fail(f.source(), ": field \"", f.name("sliding_window"), "\" must be positive or null, found ",
         c.sliding_window);
  c.sliding_layers.assign(c.sliding_window > 0 ? c.num_hidden_layers : 0, true);
}

// Fields lockstep does not implement for these families, refused where they would change the
// math (transformers reads them; ignoring them would silently compute another model).
void refuse_unimplemented(const Fields& f, const ModelConfig& c) {
  const std::string act = f.string("hidden_act", "silu");
  if (act != "silu")
    fail(f.source(), ": field \"", f.name("hidden_act"), "\" is \"", act, "\"; lockstep's ",
         c.model_type, " implements only \"silu\" (SwiGLU)");
  if (f.boolean("use_sliding_window", false))
    fail(f.source(), ": field \"", f.name("use_sliding_window"),
         "\" is true: sliding-window attention is not supported for ", c.model_type, " yet");
}

// ---- Gemma 3 -----------------------------------------------------------------------------------
// transformers 5.17 Gemma3TextConfig. Published Gemma 3 configs omit whatever equals these class
// defaults (gemma-3-4b's text_config names only a few fields), so the defaults are the model.

// One layer type's RoPE ("full_attention" / "sliding_attention" entry of rope_parameters, or the
// legacy top-level keys): theta and scaling. partial rotation does not exist in Gemma 3.
void parse_gemma3_rope_entry(const Fields& p, double default_theta, const ModelConfig& c,
                             double& theta, RopeScaling& scaling) {
  theta = p.number("rope_theta", default_theta);
  if (p.has("partial_rotary_factor") && p.number("partial_rotary_factor", 1.0) != 1.0)
    fail(p.source(), ": field \"", p.name("partial_rotary_factor"),
         "\" is not 1; Gemma 3 rotates the whole head");
  ModelConfig tmp;  // parse_scaling writes into a config's rope_scaling
  tmp.max_position_embeddings = c.max_position_embeddings;
  parse_scaling(p, p.string("rope_type", p.string("type", "default")), tmp);
  scaling = tmp.rope_scaling;
}

void parse_gemma3_rope(const Fields& f, const json& obj, ModelConfig& c) {
  if (f.has("partial_rotary_factor") && f.number("partial_rotary_factor", 1.0) != 1.0)
    fail(f.source(), ": field \"", f.name("partial_rotary_factor"),
         "\" is not 1; Gemma 3 rotates the whole head");
  const double global_theta = f.number("rope_theta", 1000000.0);
  const double local_theta = f.number("rope_local_base_freq", 10000.0);
  if (!f.has("rope_parameters")) {
    // Legacy keys: rope_theta and rope_scaling for full layers, rope_local_base_freq for sliding.
    c.rope_theta = global_theta;
    c.rope_local_theta = local_theta;
    if (f.has("rope_scaling")) {
      const json& rs = obj["rope_scaling"];
      if (!rs.is_object())
        fail(f.source(), ": field \"", f.name("rope_scaling"), "\" must be an object or null, found ",
             rs.dump());
      Fields s(rs, f.source(), f.name("rope_scaling") + ".");
      parse_scaling(s, s.string("rope_type", s.string("type", "default")), c);
    }
    return;
  }
  // transformers 5: rope_parameters keyed by layer type.
  const json& rp = obj["rope_parameters"];
  const std::string rp_name = f.name("rope_parameters");
  if (!rp.is_object())
    fail(f.source(), ": field \"", rp_name, "\" must be an object, found ", rp.dump());
  if (f.has("rope_scaling"))
    fail(f.source(), ": fields \"", rp_name, "\" and \"", f.name("rope_scaling"),
         "\" are both set; Gemma 3 expects one of them");
  for (auto it = rp.begin(); it != rp.end(); ++it)
    if (it.key() != "full_attention" && it.key() != "sliding_attention")
      fail(f.source(), ": field \"", rp_name, "\": unexpected key \"", it.key(),
           "\" (Gemma 3 keys RoPE by layer type: full_attention, sliding_attention)");
  auto entry = [&](const char* type, double def_theta, double& theta, RopeScaling& scaling) {
    if (!rp.contains(type)) {
      theta = def_theta;
      scaling = RopeScaling{};
      return;
    }
    if (!rp[type].is_object())
      fail(f.source(), ": field \"", rp_name, ".", type, "\" must be an object, found ",
           rp[type].dump());
    Fields p(rp[type], f.source(), rp_name + "." + type + ".");
    parse_gemma3_rope_entry(p, def_theta, c, theta, scaling);
  };
  entry("full_attention", global_theta, c.rope_theta, c.rope_scaling);
  entry("sliding_attention", local_theta, c.rope_local_theta, c.rope_local_scaling);
}

void parse_gemma3_layers(const Fields& f, const json& obj, ModelConfig& c) {
  c.sliding_layers.clear();
  const std::vector<size_t> kinds =
      layer_kinds(f, obj, c.num_hidden_layers, {"sliding_attention", "full_attention"});
  if (!kinds.empty()) {
    for (size_t k : kinds) c.sliding_layers.push_back(k == 0);
  } else {
    // The older form: every sliding_window_pattern-th layer is global.
    const int64_t n = f.integer("sliding_window_pattern", 6);
    if (n <= 0) fail(f.source(), ": field \"", f.name("sliding_window_pattern"), "\" must be > 0");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.sliding_layers.push_back((i + 1) % n != 0);
  }
  const bool any_sliding =
      std::find(c.sliding_layers.begin(), c.sliding_layers.end(), true) != c.sliding_layers.end();
  if (!any_sliding) return;
  if (!f.has("sliding_window") && obj.contains("sliding_window"))
    fail(f.source(), ": field \"", f.name("sliding_window"),
         "\" is null, but some layers are sliding_attention");
  c.sliding_window = f.integer("sliding_window", 4096);
  if (c.sliding_window <= 0)
    fail(f.source(), ": field \"", f.name("sliding_window"), "\" must be positive, found ",
         c.sliding_window);
}

// The text config `obj` (the top level for gemma3_text, text_config for gemma3).
void parse_gemma3(const Fields& top, const Fields& f, const json& obj, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 262208);
  c.hidden_size = f.integer("hidden_size", 2304);
  c.intermediate_size = f.integer("intermediate_size", 9216);
  c.num_hidden_layers = f.integer("num_hidden_layers", 26);
  c.num_attention_heads = f.integer("num_attention_heads", 8);
  c.num_key_value_heads = f.integer("num_key_value_heads", 4);
  c.head_dim = f.integer("head_dim", 256);
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "head_dim"})
    if (f.integer(key, 1) <= 0) fail(f.source(), ": field \"", f.name(key), "\" must be positive");
  if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0)
    fail(f.source(), ": field \"", f.name("num_key_value_heads"), "\" (", c.num_key_value_heads,
         ") must divide \"", f.name("num_attention_heads"), "\" (", c.num_attention_heads, ")");
  c.max_position_embeddings = f.integer("max_position_embeddings", 131072);
  c.rms_norm_eps = f.number("rms_norm_eps", 1e-6);
  c.partial_rotary_factor = 1.0;
  parse_gemma3_rope(f, obj, c);
  parse_gemma3_layers(f, obj, c);
  c.tie_word_embeddings = top.boolean("tie_word_embeddings", f.boolean("tie_word_embeddings", true));
  c.attention_bias = f.boolean("attention_bias", false);
  c.mlp_bias = false;
  c.qk_norm = true;
  c.zero_centered_norm = true;  // Gemma's RMSNorm: x_normed * (1 + w), every norm
  c.query_pre_attn_scalar = f.number("query_pre_attn_scalar", 256.0);
  if (!(c.query_pre_attn_scalar > 0))
    fail(f.source(), ": field \"", f.name("query_pre_attn_scalar"), "\" must be positive");
  c.final_logit_softcapping = f.number("final_logit_softcapping", 0.0);
  if (f.has("final_logit_softcapping") && !(c.final_logit_softcapping > 0))
    fail(f.source(), ": field \"", f.name("final_logit_softcapping"),
         "\" must be positive or null, found ", c.final_logit_softcapping);
  if (f.has("attn_logit_softcapping"))
    fail(f.source(), ": field \"", f.name("attn_logit_softcapping"),
         "\" is set: soft-capped attention scores are not supported (Gemma 3 checkpoints leave "
         "it null)");
  if (f.boolean("use_bidirectional_attention", false))
    fail(f.source(), ": field \"", f.name("use_bidirectional_attention"),
         "\" is true: bidirectional (encoder) attention is not supported");
  // Gemma3MLP reads hidden_activation only (a hidden_act key is not used by transformers).
  c.hidden_activation = f.string("hidden_activation", "gelu_pytorch_tanh");
  if (c.hidden_activation != "gelu_pytorch_tanh" && c.hidden_activation != "gelu_new")
    fail(f.source(), ": field \"", f.name("hidden_activation"), "\" is \"", c.hidden_activation,
         "\"; lockstep's gemma3 implements gelu_pytorch_tanh (and gelu_new, the same formula)");
  c.hidden_activation = "gelu_pytorch_tanh";
  c.torch_dtype = f.string("torch_dtype", f.string("dtype", top.string("torch_dtype", "float32")));
  parse_moe(f, obj, c);  // dense: refuses a config that lists experts
}

// MLX's top-level "quantization" block (mlx-lm writes it; "affine" mode is the only one here).
void parse_quantization(const Fields& top, const json& root, ModelConfig& c) {
  if (!top.has("quantization")) return;
  const json& q = root["quantization"];
  if (!q.is_object())
    fail(top.source(), ": field \"quantization\" must be an object, found ", q.dump());
  Fields qf(q, top.source(), "quantization.");
  const std::string mode = qf.string("mode", "affine");
  if (mode != "affine")
    fail(top.source(), ": field \"quantization.mode\" is \"", mode,
         "\"; only \"affine\" (group-wise scale and bias) is supported");
  c.quant_bits = qf.positive("bits");
  c.quant_group_size = qf.positive("group_size");
  if (c.quant_bits != 4 && c.quant_bits != 8)
    fail(top.source(), ": field \"quantization.bits\" is ", c.quant_bits,
         "; lockstep supports 4 and 8");
}

}  // namespace

int64_t ModelConfig::rotary_dim() const {
  int64_t d = static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
  return d - d % 2;
}

LayerKind ModelConfig::layer_kind(int64_t layer) const {
  if (layer < 0 || layer >= num_hidden_layers)
    fail(source, ": layer ", layer, " out of range (", num_hidden_layers, " layers)");
  if (layer_types.empty()) return LayerKind::FullAttention;
  return layer_types[static_cast<size_t>(layer)];
}

bool ModelConfig::layer_is_moe(int64_t layer) const {
  if (num_experts <= 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end())
    return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

bool ModelConfig::has_moe() const {
  for (int64_t l = 0; l < num_hidden_layers; ++l)
    if (layer_is_moe(l)) return true;
  return false;
}

int64_t ModelConfig::kv_elements_per_token() const {
  int64_t n = 0;
  for (int64_t l = 0; l < num_hidden_layers; ++l) {
    if (layer_kind(l) != LayerKind::FullAttention) continue;
    if (!gemma4.kv_source.empty() && gemma4.kv_source[static_cast<size_t>(l)] != l) continue;
    n += 2 * kv_heads_of(l) * head_dim_of(l);
  }
  return n;
}

int64_t ModelConfig::head_dim_of(int64_t layer) const {
  return layer_head_dims.empty() ? head_dim : layer_head_dims.at(static_cast<size_t>(layer));
}

int64_t ModelConfig::kv_heads_of(int64_t layer) const {
  return layer_kv_heads.empty() ? num_key_value_heads
                                : layer_kv_heads.at(static_cast<size_t>(layer));
}

int64_t ModelConfig::attention_window(int64_t layer) const {
  if (layer < 0 || layer >= num_hidden_layers)
    fail(source, ": layer ", layer, " out of range (", num_hidden_layers, " layers)");
  if (sliding_layers.empty() || !sliding_layers[static_cast<size_t>(layer)]) return 0;
  return sliding_window;
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    fail(source, ": not valid JSON (", e.what(), ")");
  }
  if (!root.is_object()) fail(source, ": expected a JSON object, found ", root.type_name());
  Fields top(root, source, "");
  if (!top.has("model_type"))
    fail(source, ": required field \"model_type\" is missing (supported: ", kSupported, ")");
  const std::string type = top.string("model_type", "");

  ModelConfig c;
  c.source = source;
  const json* text = &root;
  std::string prefix;
  // Multimodal wrappers: the language model's config lives under text_config and its weights one
  // level down. Gemma3ForConditionalGeneration's published checkpoints (and transformers 5.17's
  // save_pretrained) hold language_model.model.*; models/gemma3.cpp also reads transformers'
  // module names, model.language_model.*.
  struct Wrapper {
    const char *outer, *text, *weights;
  };
  static constexpr Wrapper kWrappers[] = {
      {"qwen3_5", "qwen3_5_text", "model.language_model."},
      {"qwen3_5_moe", "qwen3_5_moe_text", "model.language_model."},
      {"gemma3", "gemma3_text", "language_model.model."},
      {"gemma4", "gemma4_text", "model.language_model."},
  };
  const Wrapper* wrapper = nullptr;
  for (const Wrapper& w : kWrappers)
    if (type == w.outer) wrapper = &w;
  if (wrapper) {
    if (!root.contains("text_config") || !root["text_config"].is_object())
      fail(source, ": model_type ", type, " needs a \"text_config\" object");
    text = &root["text_config"];
    prefix = "text_config.";
    c.weight_prefix = wrapper->weights;
    c.model_type = wrapper->text;
  } else if (type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3" ||
             type == "qwen3_moe" ||
             type == "qwen3_5_text" || type == "qwen3_5_moe_text" || type == "qwen3_next" ||
             type == "gemma3_text" || type == "gemma4_text") {
    c.model_type = type;
  } else if (type == "gemma4_assistant") {
    fail(source, ": model_type gemma4_assistant is a drafter that runs beside its Gemma 4 target "
         "(it reads the target's KV cache), not a model of its own: pass it as --draft-model "
         "with --spec assistant");
  } else if (type == "qwen2_moe" || type == "mixtral") {
    fail(source, ": MoE model_type \"", type, "\" is not supported yet (supported: ", kSupported,
         ")");
  } else {
    fail(source, ": field \"model_type\": unsupported value \"", type, "\" (supported: ",
         kSupported, ")");
  }
  const json& obj = *text;
  Fields f(obj, source, prefix);
  if (c.model_type == "gemma3_text" || c.model_type == "gemma4_text") {
    if (c.model_type == "gemma3_text") parse_gemma3(top, f, obj, c);
    else parse_gemma4(top, f, obj, c);
    parse_quantization(top, root, c);
    c.eos_token_ids = token_ids(f, "eos_token_id");
    if (c.eos_token_ids.empty()) c.eos_token_ids = token_ids(top, "eos_token_id");
    std::vector<int32_t> bos = token_ids(f, "bos_token_id");
    if (bos.empty()) bos = token_ids(top, "bos_token_id");
    // Gemma3TextConfig's and Gemma4TextConfig's defaults when no level names them (null means
    // none).
    if (!f.has("eos_token_id") && !top.has("eos_token_id") && !obj.contains("eos_token_id"))
      c.eos_token_ids = {1};
    if (!f.has("bos_token_id") && !top.has("bos_token_id") && !obj.contains("bos_token_id"))
      bos = {2};
    c.bos_token_id = bos.empty() ? -1 : bos.front();
    return c;
  }
  const bool hybrid = c.model_type == "qwen3_5_text" || c.model_type == "qwen3_5_moe_text" ||
                      c.model_type == "qwen3_next";

  c.vocab_size = f.positive("vocab_size");
  c.hidden_size = f.positive("hidden_size");
  // Qwen3.5-MoE has no dense MLP, so no intermediate_size.
  c.intermediate_size = c.model_type == "qwen3_5_moe_text" ? f.integer("intermediate_size", 0)
                                                           : f.positive("intermediate_size");
  c.num_hidden_layers = f.positive("num_hidden_layers");
  c.num_attention_heads = f.positive("num_attention_heads");
  c.num_key_value_heads = f.integer("num_key_value_heads", c.num_attention_heads);
  if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0)
    fail(source, ": field \"", f.name("num_key_value_heads"), "\" (", c.num_key_value_heads,
         ") must divide \"", f.name("num_attention_heads"), "\" (", c.num_attention_heads, ")");
  // transformers' class defaults: Qwen3 128, the hybrids 256, Llama/Qwen2/Qwen3-MoE hidden / heads.
  int64_t default_head_dim = c.model_type == "qwen3" ? 128 : hybrid ? 256 : 0;
  if (f.has("head_dim")) {
    c.head_dim = f.positive("head_dim");
  } else if (default_head_dim > 0) {
    c.head_dim = default_head_dim;
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail(source, ": field \"", f.name("head_dim"), "\" is missing and hidden_size (",
           c.hidden_size, ") is not a multiple of num_attention_heads (", c.num_attention_heads,
           ")");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  const int64_t default_positions = c.model_type == "llama"     ? 2048
                                    : c.model_type == "mistral" ? 4096 * 32
                                                                : 32768;
  c.max_position_embeddings = f.integer("max_position_embeddings", default_positions);
  c.rms_norm_eps = f.number("rms_norm_eps", 1e-6);
  c.rope_theta = 10000.0;
  c.partial_rotary_factor = hybrid ? 0.25 : 1.0;
  parse_rope(f, obj, c);
  if (!(c.partial_rotary_factor > 0.0 && c.partial_rotary_factor <= 1.0))
    fail(source, ": field \"", f.name("partial_rotary_factor"), "\" must be in (0, 1], found ",
         c.partial_rotary_factor);
  // The wrapper decides whether lm_head is tied; fall back to the text config's own flag.
  c.tie_word_embeddings = top.boolean("tie_word_embeddings", f.boolean("tie_word_embeddings", false));
  // Mistral's attention has no biases whatever the config says (MistralAttention: bias=False).
  c.attention_bias = c.model_type == "qwen2"     ? true
                     : c.model_type == "mistral" ? false
                                                 : f.boolean("attention_bias", false);
  c.mlp_bias = c.model_type == "llama" ? f.boolean("mlp_bias", false) : false;
  c.qk_norm = c.model_type != "llama" && c.model_type != "qwen2" && c.model_type != "mistral";
  if (c.model_type == "mistral") parse_mistral_window(f, obj, c);
  c.torch_dtype = f.string("torch_dtype", f.string("dtype", top.string("torch_dtype", "float32")));

  if (hybrid) parse_hybrid(f, obj, c);
  parse_moe(f, obj, c);
  refuse_unimplemented(f, c);

  parse_quantization(top, root, c);

  c.eos_token_ids = token_ids(f, "eos_token_id");
  if (c.eos_token_ids.empty() && text != &root) c.eos_token_ids = token_ids(top, "eos_token_id");
  std::vector<int32_t> bos = token_ids(f, "bos_token_id");
  if (bos.empty() && text != &root) bos = token_ids(top, "bos_token_id");
  c.bos_token_id = bos.empty() ? -1 : bos.front();
  return c;
}

ModelConfig load_model_config(const std::string& dir) {
  namespace fs = std::filesystem;
  auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) fail(p.string(), ": cannot read");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  };
  const fs::path config_path = fs::path(dir) / "config.json";
  if (!fs::exists(config_path)) fail(config_path.string(), ": not found (is ", dir,
                                     " a Hugging Face checkpoint directory?)");
  ModelConfig c = parse_model_config(read(config_path), config_path.string());

  // generation_config.json is what transformers' generate() obeys for eos/bos.
  const fs::path gen_path = fs::path(dir) / "generation_config.json";
  if (fs::exists(gen_path)) {
    json g;
    try {
      g = json::parse(read(gen_path));
    } catch (const json::exception& e) {
      fail(gen_path.string(), ": not valid JSON (", e.what(), ")");
    }
    if (!g.is_object()) fail(gen_path.string(), ": expected a JSON object");
    Fields gf(g, gen_path.string(), "");
    std::vector<int32_t> eos = token_ids(gf, "eos_token_id");
    if (!eos.empty()) c.eos_token_ids = eos;
    std::vector<int32_t> bos = token_ids(gf, "bos_token_id");
    if (!bos.empty()) c.bos_token_id = bos.front();
  }
  return c;
}

}  // namespace lockstep
