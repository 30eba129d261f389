// Added tokens ("added_tokens" in tokenizer.json): strings such as <|im_start|> that are cut out
// of the input before the model sees it. Matching follows the reference: leftmost match first,
// longest among those starting at the same byte, then the single_word/lstrip/rstrip rules.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false, single_word = false, lstrip = false, rstrip = false,
       normalized = false;
};

// A byte trie over the token strings of one matching set.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher();
  ~AddedTokenMatcher();
  void add(std::string_view pattern, size_t token_index);
  bool empty() const;

  struct Span {
    size_t b, e;
    int64_t token;  // index into the token list, or -1 for plain text
  };
  // Splits `text` into plain stretches and token matches; `tokens` supplies the match rules.
  std::vector<Span> split(std::string_view text, const std::vector<AddedToken>& tokens) const;

 private:
  struct Node;
  std::vector<Node> nodes_;
  // Longest pattern starting at text[at]: (length, token index), or nullopt.
  std::optional<std::pair<size_t, size_t>> longest_at(std::string_view text, size_t at) const;
};

}  // namespace lockstep
