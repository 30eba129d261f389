// Post-processors from tokenizer.json ("post_processor" field), applied only when the caller asks
// for special tokens: TemplateProcessing adds BOS/EOS around the sequence; ByteLevel changes only
// offsets, so it leaves ids alone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_fields.h"

namespace lockstep {

class PostProcessor {
 public:
  // `j` may be null.
  static std::unique_ptr<PostProcessor> load(const tok::json& j, const std::string& where);
  ~PostProcessor();

  std::vector<int32_t> apply(std::vector<int32_t> ids) const;

 private:
  struct Step;
  std::vector<std::unique_ptr<Step>> steps_;
  void add(const tok::json& j, const std::string& where);
};

}  // namespace lockstep
