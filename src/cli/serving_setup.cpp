#include "cli/serving_setup.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace lockstep::cli {

namespace {

nlohmann::ordered_json template_vars_of(const std::string& dir) {
  const std::string path = dir + "/tokenizer_config.json";
  if (!std::filesystem::exists(path)) return nlohmann::ordered_json::object();
  std::ifstream in(path);
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) fail(path, ": not valid JSON");
  return chat::special_tokens_from_config(config);
}

}  // namespace

ServingBundle load_serving_bundle(const ModelFlags& flags, const SpecFlags& spec, int64_t kv_tokens) {
  ServingBundle b;
  b.dir = resolve_model_dir(flags);
  ModelFlags mf = flags;
  mf.dir = b.dir;
  mf.ctx_size = kv_tokens;
  b.model = load_model_from_flags(mf);
  const KvPool& pool = b.model->kv_pool();
  const int64_t capacity = pool.total_blocks() * pool.block_tokens();
  const int64_t max_pos = b.model->config().max_position_embeddings;
  b.context_tokens = max_pos > 0 ? std::min(capacity, max_pos) : capacity;

  // The draft model is small; load it whenever one is named or shipped, so any request may ask
  // for spec "draft".
  const std::string draft_dir = !spec.draft_model.empty() ? spec.draft_model : default_draft_dir(b.dir);
  if (spec.spec == "draft" && draft_dir.empty()) fail("--spec draft needs --draft-model DIR");
  if (spec.spec == "assistant" && spec.draft_model.empty())
    fail("--spec assistant needs --draft-model DIR (a gemma4_assistant checkpoint)");
  // A Gemma 4 assistant there serves spec "assistant" instead (it reads the target's KV, so it
  // has no cache of its own to size).
  if (!draft_dir.empty() && is_gemma4_assistant_dir(draft_dir)) {
    b.assistant = load_gemma4_assistant(draft_dir, *b.model);
  } else if (!draft_dir.empty()) {
    if (spec.spec == "assistant")
      fail("--spec assistant: --draft-model ", draft_dir, " is not a gemma4_assistant checkpoint");
    b.draft = load_draft_model(draft_dir, *b.model, capacity);
  }

  b.tokenizer = load_tokenizer_if_present(b.dir);
  b.eos_ids = eos_ids_for(b.model->config(), b.tokenizer.get());
  if (b.tokenizer) {
    if (b.tokenizer->chat_template().empty()) {
      b.chat_template_error = b.dir + " has no chat template (tokenizer_config.json chat_template)";
    } else {
      try {
        b.chat_template = std::make_shared<const ChatTemplate>(b.tokenizer->chat_template());
      } catch (const Error& e) {
        b.chat_template_error = std::string("the chat template does not parse: ") + e.what();
      }
    }
    b.template_vars = template_vars_of(b.dir);
  } else {
    b.chat_template_error = b.dir + " has no tokenizer.json";
  }
  return b;
}

}  // namespace lockstep::cli
