#include "server/reasoning.h"

#include <algorithm>

namespace lockstep::server {

namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";
constexpr const char* kSpace = " \t\r\n";

// A tag the tokenizer holds as a special token never reaches the text (decode skips specials).
bool special_tag(const Tokenizer& tok, std::string_view tag) {
  const auto id = tok.token_id(tag);
  return id && tok.is_special(*id);
}

}  // namespace

ReasoningMode reasoning_mode(std::string_view prompt, const Tokenizer* tokenizer) {
  if (!tokenizer || special_tag(*tokenizer, kOpen) || special_tag(*tokenizer, kClose)) return ReasoningMode::kOff;
  const size_t end = prompt.find_last_not_of(kSpace);
  if (end != std::string_view::npos && prompt.substr(0, end + 1).ends_with(kOpen)) return ReasoningMode::kOpened;
  return tokenizer->token_id(kOpen) && tokenizer->token_id(kClose) ? ReasoningMode::kDetect : ReasoningMode::kOff;
}

ReasoningSplitter::ReasoningSplitter(ReasoningMode mode) {
  switch (mode) {
    case ReasoningMode::kOff: state_ = State::kContent; break;
    case ReasoningMode::kDetect: state_ = State::kStart; break;
    case ReasoningMode::kOpened:
      state_ = State::kReasoning;
      has_reasoning_ = true;
      break;
  }
}

void ReasoningSplitter::run(ReasoningParts& out) {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        const size_t p = held_.find_first_not_of(kSpace);
        if (p == std::string::npos) return;  // only whitespace yet: the tag may still come
        const std::string_view rest = std::string_view(held_).substr(p);
        if (rest.starts_with(kOpen)) {
          held_.erase(0, p + kOpen.size());
          state_ = State::kReasoning;
          has_reasoning_ = true;
        } else if (rest.size() < kOpen.size() && kOpen.starts_with(rest)) {
          return;  // "<thi": wait for the next delta
        } else {
          state_ = State::kContent;
        }
        break;
      }
      case State::kReasoning: {
        const size_t e = held_.find(kClose);
        if (e != std::string::npos) {
          out.reasoning.append(held_, 0, e);
          held_.erase(0, e + kClose.size());
          state_ = State::kAfterEnd;
          break;
        }
        // Keep the longest tail that could be the start of </think>.
        size_t keep = 0;
        for (size_t k = std::min(kClose.size() - 1, held_.size()); k > 0; --k)
          if (std::string_view(held_).ends_with(kClose.substr(0, k))) {
            keep = k;
            break;
          }
        out.reasoning.append(held_, 0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return;
      }
      case State::kAfterEnd: {
        // The blank lines between </think> and the answer are layout, not content.
        const size_t p = held_.find_first_not_of(kSpace);
        if (p == std::string::npos) {
          held_.clear();
          return;
        }
        held_.erase(0, p);
        state_ = State::kContent;
        break;
      }
      case State::kContent:
        out.content += held_;
        held_.clear();
        return;
    }
  }
}

ReasoningParts ReasoningSplitter::push(std::string_view text) {
  ReasoningParts out;
  held_.append(text);
  run(out);
  return out;
}

ReasoningParts ReasoningSplitter::finish() {
  ReasoningParts out;
  if (state_ == State::kStart) out.content = std::move(held_);
  if (state_ == State::kReasoning) out.reasoning = std::move(held_);
  held_.clear();
  return out;
}

size_t ReasoningSplitter::reasoning_end(std::string_view text, ReasoningMode mode) {
  size_t from = 0;
  if (mode == ReasoningMode::kOff) return 0;
  if (mode == ReasoningMode::kDetect) {
    const size_t p = text.find_first_not_of(kSpace);
    if (p == std::string_view::npos || !text.substr(p).starts_with(kOpen)) return 0;
    from = p + kOpen.size();
  }
  const size_t e = text.find(kClose, from);
  return e == std::string_view::npos ? text.size() : e + kClose.size();
}

ReasoningParts ReasoningSplitter::split(std::string_view text, ReasoningMode mode, bool* has_reasoning) {
  ReasoningSplitter s(mode);
  ReasoningParts all = s.push(text);
  ReasoningParts rest = s.finish();
  all.reasoning += rest.reasoning;
  all.content += rest.content;
  if (has_reasoning) *has_reasoning = s.has_reasoning();
  return all;
}

}  // namespace lockstep::server
