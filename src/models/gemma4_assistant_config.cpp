// gemma4_assistant config.json -> Gemma4AssistantConfig, with transformers 5.17's
// Gemma4AssistantConfig defaults. Its text_config is a Gemma 4 text config read by the gemma4
// parser (models/gemma4_config.cpp), then held to what Gemma4AssistantConfig.validate_architecture
// requires. Fields the assistant's forward never reads are ignored as transformers ignores them:
// text_config.final_logit_softcapping (Gemma4AssistantForCausalLM applies no soft-cap), the
// token ids (the target's tokenizer and stop rules apply).
#include "models/gemma4_assistant_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "models/config_fields.h"

namespace lockstep {

using config_detail::Fields;
using config_detail::json;

namespace {

json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::parse_error& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
}

// What Gemma4AssistantConfig.validate_architecture requires of the text stack: no per-layer
// inputs (checked before the gemma4 parser, whose own checks of them would name another field).
void check_no_per_layer_inputs(const Fields& f) {
  const int64_t ple = f.integer("hidden_size_per_layer_input", 256);
  if (ple != 0)
    fail(f.source(), ": field \"", f.name("hidden_size_per_layer_input"), "\" must be 0 for a "
         "gemma4_assistant, found ", ple,
         (f.has("hidden_size_per_layer_input") ? "" : " (the Gemma 4 default, as it is absent)"));
  const int64_t ple_vocab = f.integer("vocab_size_per_layer_input", 262144);
  if (ple_vocab != 0)
    fail(f.source(), ": field \"", f.name("vocab_size_per_layer_input"), "\" must be 0 for a "
         "gemma4_assistant, found ", ple_vocab,
         (f.has("vocab_size_per_layer_input") ? "" : " (the Gemma 4 default, as it is absent)"));
}

// The rest of validate_architecture, on the parsed stack.
void check_text_stack(const Fields& f, const ModelConfig& t) {
  if (t.gemma4.moe_block)
    fail(f.source(), ": field \"", f.name("enable_moe_block"), "\" must be false for a "
         "gemma4_assistant");
  if (t.gemma4.double_wide_mlp)
    fail(f.source(), ": field \"", f.name("use_double_wide_mlp"), "\" must be false for a "
         "gemma4_assistant");
}

}  // namespace

bool is_gemma4_assistant_dir(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  if (!std::filesystem::exists(path)) return false;
  const json root = read_json_file(path);
  return root.is_object() && root.contains("model_type") && root["model_type"].is_string() &&
         root["model_type"].get<std::string>() == "gemma4_assistant";
}

Gemma4AssistantConfig parse_gemma4_assistant_config(const std::string& json_text,
                                                    const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::parse_error& e) {
    fail(source, ": invalid JSON: ", e.what());
  }
  if (!root.is_object()) fail(source, ": expected a JSON object");
  Fields top(root, source, "");
  const std::string type = top.string("model_type", "");
  if (type != "gemma4_assistant")
    fail(source, ": field \"model_type\" is \"", type, "\"; an assistant drafter has "
         "\"gemma4_assistant\"");
  if (!root.contains("text_config") || !root["text_config"].is_object())
    fail(source, ": model_type gemma4_assistant needs a \"text_config\" object");

  Gemma4AssistantConfig a;
  a.source = source;
  // Every layer shares KV (transformers sets num_kv_shared_layers to num_hidden_layers when it
  // is 0 or absent, and refuses any other value); the gemma4 parser knows only sharing with
  // earlier layers of the same model, so it reads the stack as unshared and the sharing is set
  // here.
  json text = root["text_config"];
  const Fields f(text, source, "text_config.");
  const int64_t layers = f.integer("num_hidden_layers", 30);
  const int64_t shared = f.integer("num_kv_shared_layers", 0);
  if (shared != 0 && shared != layers)
    fail(source, ": field \"text_config.num_kv_shared_layers\" is ", shared, "; every layer of a "
         "gemma4_assistant reads its target's KV (expected ", layers, " = num_hidden_layers)");
  text["num_kv_shared_layers"] = 0;
  ModelConfig& t = a.text;
  t.source = source;
  t.model_type = "gemma4_text";
  t.weight_prefix = "model.";
  check_no_per_layer_inputs(f);
  config_detail::parse_gemma4(top, f, text, t);
  check_text_stack(f, t);
  t.gemma4.kv_shared_layers = t.num_hidden_layers;
  t.gemma4.kv_source.assign(static_cast<size_t>(t.num_hidden_layers), -1);

  a.tie_word_embeddings = top.boolean("tie_word_embeddings", true);
  t.tie_word_embeddings = a.tie_word_embeddings;
  a.backbone_hidden_size = top.integer("backbone_hidden_size", 1536);
  if (a.backbone_hidden_size <= 0)
    fail(source, ": field \"backbone_hidden_size\" must be positive, found ",
         a.backbone_hidden_size);
  a.use_ordered_embeddings = top.boolean("use_ordered_embeddings", false);
  a.num_centroids = top.integer("num_centroids", 2048);
  a.centroid_top_k = top.integer("centroid_intermediate_top_k", 32);
  if (a.use_ordered_embeddings) {
    // transformers views token_ordering as [num_centroids][vocab / num_centroids].
    if (a.num_centroids <= 0 || t.vocab_size % a.num_centroids != 0)
      fail(source, ": field \"num_centroids\" (", a.num_centroids, ") must be positive and "
           "divide text_config.vocab_size (", t.vocab_size, ") when use_ordered_embeddings is "
           "true");
    if (a.centroid_top_k <= 0 || a.centroid_top_k > a.num_centroids)
      fail(source, ": field \"centroid_intermediate_top_k\" (", a.centroid_top_k, ") must be in "
           "[1, num_centroids = ", a.num_centroids, "]");
  }
  return a;
}

Gemma4AssistantConfig load_gemma4_assistant_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  return parse_gemma4_assistant_config(read_json_file(path).dump(), path);
}

std::vector<LayoutTensor> gemma4_assistant_layout(const Gemma4AssistantConfig& c, DType dtype) {
  if (c.use_ordered_embeddings)
    fail(c.source, ": make-random cannot write use_ordered_embeddings checkpoints (their "
         "masked_embedding.token_ordering is an integer permutation)");
  // The text stack as a Gemma 4 text model lays it out (no k/v: every layer shares), then the
  // projections to and from the target's hidden size.
  std::vector<LayoutTensor> out = checkpoint_layout(c.text, dtype);
  const int64_t H = c.text.hidden_size, B = c.backbone_hidden_size;
  out.push_back({{"pre_projection.weight", dtype, {H, 2 * B}}, TensorRole::Weight});
  out.push_back({{"post_projection.weight", dtype, {B, H}}, TensorRole::Weight});
  return out;
}

}  // namespace lockstep
