// Stop strings in the text of a growing token sequence, in time proportional to each token's new
// text rather than to the whole text. The text is Tokenizer::decode(tokens, skip special), the
// same text `generate` prints and the server returns; it is built as a StreamDecoder's final text
// (what it has returned) plus what it still holds back, which equal that decode at every length.
// A stop that lies wholly inside text that was final at the previous token was already looked
// for then, so each token only scans from (final text then) - (longest stop - 1) onwards; the
// first match found is therefore the first in the whole text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace lockstep {

class StopMatcher {
 public:
  StopMatcher(const Tokenizer& tokenizer, std::vector<std::string> stops);

  // Appends a token; returns the byte offset in the text of the first stop string found so far
  // (std::string::npos: none yet). The caller stops there; later pushes return the same.
  size_t push(int32_t id);

 private:
  std::vector<std::string> stops_;  // non-empty ones
  size_t longest_ = 0;
  StreamDecoder stream_;
  std::string final_;     // the text the stream has returned (never changes)
  size_t scanned_ = 0;    // final_.size() at the previous push
  size_t found_ = std::string::npos;  // the first match, once found (later text cannot move it)
};

}  // namespace lockstep
