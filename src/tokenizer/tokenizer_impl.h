// Internal state of Tokenizer, shared by tokenizer.cpp (the pipeline) and tokenizer_load.cpp
// (reading the files).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace lockstep {

struct Tokenizer::Impl {
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Normalizer> normalizer;
  bool has_normalizer = false;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;

  std::vector<AddedToken> added;                     // in file order, deduplicated by content
  std::unordered_map<std::string, size_t> added_by_content;
  std::unordered_map<int32_t, size_t> added_by_id;
  std::unordered_map<int32_t, std::string> decode_form;  // normalized added tokens
  AddedTokenMatcher raw_matcher;         // tokens with normalized=false, matched in raw text
  AddedTokenMatcher normalized_matcher;  // tokens with normalized=true, matched after normalizing

  std::string chat_template;
  std::optional<int32_t> bos;
  std::vector<int32_t> eos;
  int32_t vocab_end = 0;

  void load_tokenizer_json(std::string_view text, const std::string& name);
  void load_config_json(std::string_view text, const std::string& name);
  void add_generation_eos(std::string_view text, const std::string& name);
  // The token string used when decoding `id`, or nullptr when the id is unknown.
  std::optional<std::string_view> piece(int32_t id) const;
};

}  // namespace lockstep
