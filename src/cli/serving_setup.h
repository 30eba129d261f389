// What `lockstep serve` and `lockstep chat` both load: the target model with a KV pool shared by
// all sequences, the optional draft model, the tokenizer, the chat template with the special
// tokens it expects, and the end-of-sequence ids (as `lockstep generate` collects them).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "cli/common.h"
#include "cli/spec_flags.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {

struct ServingBundle {
  std::string dir;
  std::unique_ptr<Model> model;
  std::unique_ptr<Model> draft;                      // for spec "draft"; may be null
  std::unique_ptr<Gemma4Assistant> assistant;        // for spec "assistant"; may be null
  std::unique_ptr<Tokenizer> tokenizer;              // may be null (ids only)
  std::shared_ptr<const ChatTemplate> chat_template;  // may be null
  std::string chat_template_error;                   // why it is null, when it is
  nlohmann::ordered_json template_vars = nlohmann::ordered_json::object();
  std::vector<int32_t> eos_ids;
  int64_t context_tokens = 0;  // longest prompt + output of one request
};

// kv_tokens: KV capacity over all sequences (flags.ctx_size when set).
ServingBundle load_serving_bundle(const ModelFlags& flags, const SpecFlags& spec, int64_t kv_tokens);

}  // namespace lockstep::cli
