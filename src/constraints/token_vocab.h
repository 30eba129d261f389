// A tokenizer vocabulary as the constraint engine sees it: each token id's exact output bytes,
// arranged in a byte trie so one walk of the matcher serves every token sharing a prefix.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lockstep::constraints {

class TokenVocabulary {
 public:
  struct Node {
    uint32_t first_child = 0, child_count = 0;  // children are contiguous, in byte order
    uint32_t begin = 0, end = 0;  // this subtree's tokens: sorted_ids()[begin, end)
    uint32_t own_end = 0;         // sorted_ids()[begin, own_end): tokens whose bytes end here
    uint8_t byte = 0;             // the edge byte from the parent
  };

  // bytes[id]: the bytes token `id` adds to the text (for byte-level BPE: the piece with the GPT-2
  // byte table undone; for SentencePiece: "▁" as a space, <0xNN> as the byte). Empty bytes mark a
  // token no grammar allows (control and special tokens). eos_ids: the tokens that end the output;
  // the mask allows them exactly when the grammar can end.
  TokenVocabulary(std::vector<std::string> bytes, std::vector<int32_t> eos_ids);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  std::span<const int32_t> eos_ids() const { return eos_; }
  bool is_eos(int32_t id) const;

  // Trie over the non-empty tokens; node 0 is the root (no bytes, no tokens of its own).
  const std::vector<Node>& nodes() const { return nodes_; }
  // Non-empty token ids in byte-lexicographic order: every trie subtree is one range of it.
  std::span<const int32_t> sorted_ids() const { return sorted_; }

 private:
  uint32_t build(uint32_t node, uint32_t lo, uint32_t hi, size_t depth);

  std::vector<std::string> bytes_;
  std::vector<int32_t> eos_;
  std::vector<int32_t> sorted_;
  std::vector<Node> nodes_;
};

}  // namespace lockstep::constraints
