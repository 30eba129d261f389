// Pre-tokenizers from tokenizer.json ("pre_tokenizer" field): they cut each normalized stretch of
// text into words that the model then encodes independently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_fields.h"

namespace lockstep {

struct Piece {
  std::string text;
  // True for the piece that begins the whole input (offset 0 in the original text); Metaspace
  // with prepend_scheme "first" adds its prefix only there.
  bool at_origin = false;
};

class PreTokenizer {
 public:
  // `j` may be null (the whole stretch is one word).
  static std::unique_ptr<PreTokenizer> load(const tok::json& j, const std::string& where);
  ~PreTokenizer();

  // Splits every piece in place; empty pieces are dropped, as the reference does.
  void apply(std::vector<Piece>& pieces) const;

 private:
  struct Step;
  std::vector<std::unique_ptr<Step>> steps_;
  void add(const tok::json& j, const std::string& where);
};

}  // namespace lockstep
