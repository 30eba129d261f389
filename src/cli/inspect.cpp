// `lockstep inspect -m DIR [--json]`: what a checkpoint is and what running it costs in memory:
// architecture, parameters, bytes by dtype, KV bytes per token and, for hybrid models, the
// recurrent state per sequence (which is also what one speculation snapshot copies).
// Needs only config.json and the safetensors files; no tokenizer.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>

#include "cli/command.h"
#include "core/error.h"
#include "decode/bench.h"
#include "io/safetensors.h"
#include "models/checkpoint_layout.h"
#include "models/config.h"
#include "models/quantize.h"

namespace lockstep::cli {
namespace {

using json = nlohmann::json;

struct InspectArgs {
  std::string dir;
  bool json = false;
};

// F32 bytes per token of the KV cache of `layers` uniform full-attention layers (K and V).
int64_t kv_bytes_per_token(const ModelConfig& c, int64_t layers) {
  return 2 * layers * c.num_key_value_heads * c.head_dim * 4;
}

// Layers with a KV cache of their own: full attention, not reading another layer's (Gemma 4).
int64_t kv_cache_layers(const ModelConfig& c) {
  int64_t n = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    n += c.layer_kind(l) == LayerKind::FullAttention &&
         (c.gemma4.kv_source.empty() || c.gemma4.kv_source[l] == l);
  return n;
}

// "kv heads X, dim Y" of the full layers when they differ from the rest (Gemma 4), else "".
std::string full_layer_shape(const ModelConfig& c) {
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.attention_window(l) == 0 && c.layer_kind(l) == LayerKind::FullAttention &&
        (c.head_dim_of(l) != c.head_dim || c.kv_heads_of(l) != c.num_key_value_heads))
      return "global layers: " + std::to_string(c.kv_heads_of(l)) + " kv heads of dim " +
             std::to_string(c.head_dim_of(l));
  return "";
}

// F32 bytes of one linear-attention layer's state: the causal conv keeps the last kernel-1
// inputs of q, k and v; the delta rule keeps a [value heads, key dim, value dim] matrix.
int64_t linear_state_bytes(const ModelConfig& c) {
  const int64_t key_dim = c.linear_num_key_heads * c.linear_key_head_dim;
  const int64_t value_dim = c.linear_num_value_heads * c.linear_value_head_dim;
  const int64_t conv = (2 * key_dim + value_dim) * (c.linear_conv_kernel_dim - 1);
  const int64_t recurrent =
      c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim;
  return (conv + recurrent) * 4;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  char s[64];
  std::snprintf(s, sizeof s, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return s;
}

json inspect(const std::string& dir) {
  const ModelConfig c = load_model_config(dir);
  const auto ck = Checkpoint::open(dir);

  int64_t params = 0, mtp_params = 0, routed_params = 0, vision_params = 0;
  for (const auto& name : ck->names()) {
    const TensorInfo& t = *ck->find(name);
    // Packed 4/8-bit codes (uint32 words beside a .scales) hold 32 / bits parameters each.
    const bool packed =
        t.dtype == DType::U32 && c.quant_bits > 0 && ck->has(tensor_stem(name) + ".scales");
    const int64_t n = packed ? t.numel() * (32 / c.quant_bits) : t.numel();
    if (name.size() > 7 && (name.compare(name.size() - 7, 7, ".scales") == 0 ||
                            name.compare(name.size() - 7, 7, ".biases") == 0) &&
        c.quant_bits > 0)
      continue;  // a quantized matrix's group scales and biases are not parameters of the model
    params += n;
    if (name.rfind("mtp.", 0) == 0) mtp_params += n;
    else if (name.find("visual.") != std::string::npos) vision_params += n;
    else if (is_routed_expert_tensor(name)) routed_params += n;
  }
  json by_dtype = json::object();
  for (const auto& [dt, bytes] : ck->bytes_by_dtype()) by_dtype[std::string(dtype_name(dt))] = bytes;

  int64_t full = 0, linear = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    (c.layer_kind(i) == LayerKind::FullAttention ? full : linear) += 1;
  std::string pattern = "all full attention";
  if (linear > 0) {
    const int64_t g = std::gcd(full, linear);
    pattern = std::to_string(linear / g) + " linear : " + std::to_string(full / g) + " full";
  }
  int64_t sliding = 0;  // Gemma 3: sliding-window attention layers among the full ones
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) sliding += c.attention_window(i) > 0;
  if (sliding > 0) {
    const int64_t global = c.num_hidden_layers - sliding, g = std::gcd(sliding, global);
    pattern = std::to_string(sliding / g) + " sliding (window " +
              std::to_string(c.sliding_window) + ") : " + std::to_string(global / g) + " global";
  }

  // Names and shapes the engine will look for; anything missing is worth knowing before a run.
  // Experts may sit in another published layout (fused or MLX switch_mlp) than the one-tensor-
  // per-expert names listed, and quantized matrices have packed shapes: those are not flagged.
  json missing = json::array(), mismatched = json::array();
  for (const auto& t : checkpoint_layout(c, DType::F32)) {
    const std::string& name = t.header.name;
    if (name.rfind("mtp.", 0) == 0) continue;  // the MTP head is optional
    const size_t at = name.find(".mlp.experts.");
    if (at != std::string::npos) {
      const std::string mlp = name.substr(0, at + 5);
      if (ck->has(mlp + "experts.gate_up_proj") || ck->has(mlp + "switch_mlp.gate_proj.weight"))
        continue;
    }
    const TensorInfo* found = ck->find(name);
    if (found == nullptr) missing.push_back(name);
    else if (found->shape != t.header.shape && !ck->has(tensor_stem(name) + ".scales"))
      mismatched.push_back(name);
  }

  const bool mtp = mtp_params > 0;
  json j = {{"dir", dir},
            {"model_type", c.model_type},
            {"weight_prefix", c.weight_prefix},
            {"layers", c.num_hidden_layers},
            {"hidden_size", c.hidden_size},
            {"intermediate_size", c.intermediate_size},
            {"attention_heads", c.num_attention_heads},
            {"kv_heads", c.num_key_value_heads},
            {"head_dim", c.head_dim},
            {"rotary_dim", c.rotary_dim()},
            {"full_layer_shape", full_layer_shape(c)},
            {"vocab_size", c.vocab_size},
            {"tied_embeddings", c.tie_word_embeddings},
            {"rope_type", c.rope_scaling.type},
            {"rope_theta", c.rope_theta},
            {"context_length", c.max_position_embeddings},
            {"torch_dtype", c.torch_dtype},
            {"eos_token_ids", c.eos_token_ids},
            {"bos_token_id", c.bos_token_id},
            {"layer_pattern", pattern},
            {"full_attention_layers", full},
            {"linear_attention_layers", linear},
            {"mtp_head", mtp},
            {"mtp_parameters", mtp_params},
            {"parameters", params},
            {"tensors", ck->names().size()},
            {"bytes", ck->total_bytes()},
            {"bytes_by_dtype", by_dtype},
            {"kv_bytes_per_token", c.kv_elements_per_token() * 4},
            {"kv_cache_layers", kv_cache_layers(c)},
            {"missing_tensors", missing},
            {"mismatched_tensors", mismatched}};
  if (mtp) j["mtp_kv_bytes_per_token"] = kv_bytes_per_token(c, c.mtp_num_hidden_layers);
  // What one batch-1 decode token reads: every weight it multiplies by, routed experts at k / E.
  j["decode_weight_bytes_per_token"] = workload_of(dir, c, 4).weight_bytes;
  if (c.has_moe()) {
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) moe_layers += c.layer_is_moe(l);
    const double share = static_cast<double>(c.num_experts_per_tok) / c.num_experts;
    j["experts"] = c.num_experts;
    j["experts_per_token"] = c.num_experts_per_tok;
    j["moe_intermediate_size"] = c.moe_intermediate_size;
    j["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
    j["moe_layers"] = moe_layers;
    j["norm_topk_prob"] = c.norm_topk_prob;
    // Parameters one text token uses (MTP and vision excluded; embeddings counted).
    j["active_parameters"] = static_cast<int64_t>(
        static_cast<double>(params - mtp_params - vision_params - routed_params) +
        share * routed_params);
  }
  if (linear > 0) {
    const int64_t state = linear * linear_state_bytes(c);
    j["recurrent_state_bytes_per_sequence"] = state;
    // A snapshot (taken before verifying drafts) copies the whole recurrent state.
    j["snapshot_bytes"] = state;
  }
  return j;
}

void print_table(const json& j) {
  auto row = [](const char* k, const std::string& v) { std::printf("%-26s %s\n", k, v.c_str()); };
  auto num = [](const json& v) { return v.dump(); };
  row("checkpoint", j["dir"].get<std::string>());
  row("model_type", j["model_type"].get<std::string>());
  row("layers", num(j["layers"]) + " (" + j["layer_pattern"].get<std::string>() + ")");
  row("hidden / intermediate", num(j["hidden_size"]) + " / " + num(j["intermediate_size"]));
  row("heads / kv heads / dim", num(j["attention_heads"]) + " / " + num(j["kv_heads"]) + " / " +
                                    num(j["head_dim"]) + " (rotary " + num(j["rotary_dim"]) + ")" +
                                    (j["full_layer_shape"].get<std::string>().empty()
                                         ? ""
                                         : "; " + j["full_layer_shape"].get<std::string>()));
  row("vocab", num(j["vocab_size"]) + (j["tied_embeddings"].get<bool>() ? " (tied)" : ""));
  row("rope", j["rope_type"].get<std::string>() + ", theta " + num(j["rope_theta"]));
  row("context length", num(j["context_length"]));
  if (j.contains("experts")) {
    char a[64];
    std::snprintf(a, sizeof a, "%.3f B", j["active_parameters"].get<double>() / 1e9);
    row("experts", num(j["experts"]) + " routed, " + num(j["experts_per_token"]) + " per token, " +
                       "width " + num(j["moe_intermediate_size"]) +
                       (j["shared_expert_intermediate_size"].get<int64_t>() > 0
                            ? ", shared expert " + num(j["shared_expert_intermediate_size"])
                            : std::string()) +
                       " (" + num(j["moe_layers"]) + " MoE layers" +
                       (j["norm_topk_prob"].get<bool>() ? ", renormalised" : "") + ")");
    row("active parameters", num(j["active_parameters"]) + " (" + a + ")");
  }
  row("mtp head", j["mtp_head"].get<bool>()
                      ? "yes (" + num(j["mtp_parameters"]) + " parameters)"
                      : "no");
  char p[64];
  std::snprintf(p, sizeof p, "%.3f B", j["parameters"].get<double>() / 1e9);
  row("parameters", num(j["parameters"]) + " (" + p + ")");
  row("tensors", num(j["tensors"]));
  row("bytes", num(j["bytes"]) + " (" + human_bytes(j["bytes"].get<double>()) + ")");
  for (auto it = j["bytes_by_dtype"].begin(); it != j["bytes_by_dtype"].end(); ++it)
    row(("  " + it.key()).c_str(), num(it.value()) + " (" + human_bytes(it.value().get<double>()) + ")");
  row("decode weight bytes", num(j["decode_weight_bytes_per_token"]) + " per token (" +
                                   human_bytes(j["decode_weight_bytes_per_token"].get<double>()) +
                                   "; routed experts at k / E)");
  row("kv bytes per token", num(j["kv_bytes_per_token"]) + " (F32 K and V, " +
                                num(j["kv_cache_layers"]) +
                                " attention layers with a cache; half that on a GPU, whose cache is BF16)");
  if (j.contains("mtp_kv_bytes_per_token"))
    row("mtp kv bytes per token", num(j["mtp_kv_bytes_per_token"]));
  if (j.contains("recurrent_state_bytes_per_sequence")) {
    row("state bytes per sequence", num(j["recurrent_state_bytes_per_sequence"]) + " (" +
                                        human_bytes(j["recurrent_state_bytes_per_sequence"].get<double>()) +
                                        ", F32 conv + delta-rule state)");
    row("snapshot bytes", num(j["snapshot_bytes"]));
  }
  if (!j["missing_tensors"].empty())
    row("MISSING tensors", std::to_string(j["missing_tensors"].size()) + ", first: " +
                               j["missing_tensors"][0].get<std::string>());
  if (!j["mismatched_tensors"].empty())
    row("WRONG-SHAPE tensors", std::to_string(j["mismatched_tensors"].size()) + ", first: " +
                                   j["mismatched_tensors"][0].get<std::string>());
}

const Command kInspect("inspect", "Describe a checkpoint: architecture, sizes, memory per token",
                       [](CLI::App& sub) -> std::function<int()> {
                         auto a = std::make_shared<InspectArgs>();
                         sub.add_option("-m,--model", a->dir, "Checkpoint directory")->required();
                         sub.add_flag("--json", a->json, "Print JSON instead of a table");
                         return [a] {
                           const json j = inspect(a->dir);
                           if (a->json) std::printf("%s\n", j.dump(2).c_str());
                           else print_table(j);
                           return 0;
                         };
                       });

}  // namespace
}  // namespace lockstep::cli
