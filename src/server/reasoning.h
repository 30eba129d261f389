// Reasoning output of thinking models: a chat answer that opens with <think>...</think> is split
// into message.reasoning_content (the text between the tags) and message.content (what follows,
// leading whitespace dropped). The split is a function of the final text alone; the streaming
// splitter gives the same two strings for any cut of that text into deltas, so a streamed
// answer's delta.reasoning_content and delta.content concatenate to the whole response's.
#pragma once

#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace lockstep::server {

enum class ReasoningMode {
  kOff,     // no split: the model has no visible think tags
  kDetect,  // split when the output starts with <think> (after whitespace)
  kOpened,  // the rendered prompt ends inside <think> (the template opened it): the output is
            // reasoning up to </think>
};

// The mode for a rendered chat prompt: kOpened when it ends with "<think>" (trailing whitespace
// aside), kDetect when the tokenizer knows "<think>" and "</think>" as tokens, else kOff. Tags
// that are special tokens are never split: decoding drops them, so the text shows no boundary.
ReasoningMode reasoning_mode(std::string_view prompt, const Tokenizer* tokenizer);

struct ReasoningParts {
  std::string reasoning, content;
};

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(ReasoningMode mode);

  // The parts of `text` (the next delta) that are now certain; a tail that may still turn out
  // to be a tag is held back.
  ReasoningParts push(std::string_view text);
  // What was held back, at the end of the output: a reasoning block never closed stays
  // reasoning; a start that only looked like "<think>" is content.
  ReasoningParts finish();
  // True once a reasoning block was seen (the response then carries reasoning_content).
  bool has_reasoning() const { return has_reasoning_; }

  // Bytes of `text` that the reasoning block spans, its tags included: 0 without one, the whole
  // text when it never closes (what usage.completion_tokens_details.reasoning_tokens counts).
  static size_t reasoning_end(std::string_view text, ReasoningMode mode);

  // The whole text at once: push(text) then finish(), concatenated.
  static ReasoningParts split(std::string_view text, ReasoningMode mode, bool* has_reasoning = nullptr);

 private:
  enum class State { kStart, kReasoning, kAfterEnd, kContent };
  void run(ReasoningParts& out);

  State state_;
  std::string held_;  // input not yet decided
  bool has_reasoning_ = false;
};

}  // namespace lockstep::server
