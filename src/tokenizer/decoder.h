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

  // The bytes one token string adds to a text when it follows other tokens: the chain applied
  // to that token alone, except that a step which joins tokens (ByteLevel, ByteFallback) yields
  // raw bytes rather than replacing an incomplete UTF-8 sequence, first-token rules (Metaspace's
  // and a Strip after Fuse removing the text's leading characters) do not apply, and with no
  // decoder the joining space comes first. Constrained decoding matches grammars over these.
  std::string token_bytes(std::string token) const;

  // True when the chain contains ByteFallback, whose output for a run of <0xNN> tokens is only
  // known once the run ends (the streaming decoder holds such runs back).
  bool has_byte_fallback() const;

 private:
  struct Step;
  static std::string strip(const std::string& t, const Step& s);
  std::vector<std::unique_ptr<Step>> steps_;
  bool none_ = false;
  void add(const tok::json& j, const std::string& where);
};

}  // namespace lockstep
