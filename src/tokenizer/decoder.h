// Decoders from tokenizer.json ("decoder" field): turn token strings back into text. Each step
// maps a list of strings to a list of strings, as in the reference, and the result is joined.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_fields.h"

namespace lockstep {

class Decoder {
 public:
  // `j` may be null: tokens are then joined with single spaces, as the reference does.
  static std::unique_ptr<Decoder> load(const tok::json& j, const std::string& where);
  ~Decoder();

  std::string decode(std::vector<std::string> tokens) const;

  // True when the chain contains ByteFallback, whose output for a run of <0xNN> tokens is only
  // known once the run ends (the streaming decoder holds such runs back).
  bool has_byte_fallback() const;

 private:
  struct Step;
  std::vector<std::unique_ptr<Step>> steps_;
  bool none_ = false;
  void add(const tok::json& j, const std::string& where);
};

}  // namespace lockstep
