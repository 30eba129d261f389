// The text of one choice as it streams. Deltas come from a StreamDecoder (never split inside a
// UTF-8 character) and hold back any tail that could still become a stop string, because once
// sent, text cannot be taken back. At the end the text is the same function of the tokens that
// `lockstep generate` prints: decode(tokens, skip special) cut where the engine found a stop
// string, so a streamed response concatenates to exactly the non-streamed one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace lockstep::server {

class ChoiceText {
 public:
  // tokenizer may be null (id-only model): the text is then empty. `shown`: special tokens whose
  // text is kept (tool-call markers such as [TOOL_CALLS], which the tool parser must see); every
  // other special token is skipped, as generate does.
  ChoiceText(const Tokenizer* tokenizer, std::vector<std::string> stops, std::vector<int32_t> shown = {});

  // Text that became safe to send with this token (often empty).
  std::string push(int32_t id);
  // The rest of the text once the engine has finished; text_limit as in StreamEvent.
  std::string finish(size_t text_limit);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  // How many of the tokens it took for the streamed text to reach `text_end` bytes (all of them
  // when it never did): the reasoning block's tokens are those up to the end of its </think>.
  int64_t tokens_until(size_t text_end) const;
  const std::string& sent() const { return sent_; }  // everything returned so far

 private:
  size_t safe_end() const;
  bool shown(int32_t id) const;
  // decode(tokens, skip special) with the shown tokens' text in place, cut where the text
  // without them reaches text_limit (the engine's stop-string cut is in that text).
  std::string final_text(size_t text_limit) const;

  const Tokenizer* tokenizer_;
  std::vector<std::string> stops_;
  std::vector<int32_t> shown_;
  std::unique_ptr<StreamDecoder> decoder_;
  std::vector<int32_t> tokens_;
  std::string decoded_;  // concatenated decoder output
  std::vector<size_t> ends_;  // decoded_.size() after each token
  std::string sent_;     // its prefix already returned
};

}  // namespace lockstep::server
