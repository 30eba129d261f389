// Normalizers from tokenizer.json ("normalizer" field): a list of text-to-text steps applied to
// each stretch of input between added tokens, before pre-tokenization.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_fields.h"

namespace lockstep {

class Normalizer {
 public:
  // `j` may be null (no normalizer). Unsupported types fail naming `where`.
  static std::unique_ptr<Normalizer> load(const tok::json& j, const std::string& where);
  ~Normalizer();

  // Normalizes valid UTF-8 `text` in place.
  void apply(std::string& text) const;

 private:
  struct Step;
  std::vector<std::unique_ptr<Step>> steps_;
  void add(const tok::json& j, const std::string& where);
};

}  // namespace lockstep
