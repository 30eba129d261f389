// What every request handler needs to know about the model being served: the engine, the
// tokenizer and chat template, the end-of-sequence ids and the context size, plus the server's
// flags. Built once by `lockstep serve`, read-only afterwards (shared by all HTTP threads).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "scheduler/engine.h"
#include "server/tools/tool_family.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::server {

class ConstraintCache;

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;             // empty: no auth
  std::string default_spec = "none";
  int default_draft_width = 0;     // 0: the mode's default
  int http_threads = 0;            // request workers (parsing, tokenizing); 0: 4
  // Tokens a chat answer may spend in its reasoning block when the request does not say
  // (--reasoning-budget); -1: no limit.
  int64_t default_reasoning_budget = -1;
};

struct ServingContext {
  Engine* engine = nullptr;
  const Tokenizer* tokenizer = nullptr;           // null: token-id requests only
  std::shared_ptr<const ChatTemplate> chat_template;  // null: /v1/chat/completions answers 400
  nlohmann::ordered_json template_vars;           // bos_token, eos_token, ... for the template
  std::vector<int32_t> eos_ids;                   // config.json's and the tokenizer's, as generate
  std::string model_name;                         // what /v1/models lists and responses carry
  int64_t context_tokens = 0;                     // longest prompt + output: Engine::context_tokens()
  size_t max_prompt_bytes = SIZE_MAX;             // longest prompt text tokenized (prompt_byte_limit)
  int64_t vocab_size = 0;
  // response_format constraints over this model's vocabulary; null without a tokenizer.
  std::shared_ptr<ConstraintCache> constraints;
  // The tool-call syntax the chat template teaches (tools::tool_family) and its markers that are
  // special tokens (kept in the text of answers to requests with tools).
  tools::ToolFamily tool_family = tools::ToolFamily::kHermes;
  std::vector<int32_t> tool_marker_ids;
  ServerConfig config;
};

}  // namespace lockstep::server
