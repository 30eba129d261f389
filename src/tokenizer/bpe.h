// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): byte-level vocabularies
// (GPT-2, Qwen, Llama-3, DeepSeek) and SentencePiece-style ones with byte fallback (Llama-2,
// Mistral, Gemma). Merges are applied exactly as the reference library orders them: lowest rank
// first, leftmost first among equal ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_fields.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/vocab.h"

namespace lockstep {

class BpeModel {
 public:
  // `tables` holds model.vocab and model.merges as streamed by read_tokenizer_json; they are
  // consumed (moved from).
  BpeModel(const tok::json& model, ModelTables& tables, const std::string& where);

  // Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  const Vocab& vocab() const { return vocab_; }

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  struct PairHash {
    size_t operator()(uint64_t k) const {  // splitmix64 finalizer: ids are dense, spread them
      k ^= k >> 30;
      k *= 0xbf58476d1ce4e5b9ULL;
      k ^= k >> 27;
      k *= 0x94d049bb133111ebULL;
      return k ^ (k >> 31);
    }
  };
  const Merge* find_merge(int32_t a, int32_t b) const {
    auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }
  void merge_all(std::vector<int32_t>& ids) const;

  Vocab vocab_;
  std::unordered_map<uint64_t, Merge, PairHash> merges_;
  std::optional<std::string> unk_token_;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int32_t unk_id_ = -1;
  int32_t byte_ids_[256];        // id of "<0xNN>" or -1 (byte fallback)
};

}  // namespace lockstep
