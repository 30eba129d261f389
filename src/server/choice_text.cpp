#include "server/choice_text.h"

#include <algorithm>

namespace lockstep::server {

ChoiceText::ChoiceText(const Tokenizer* tokenizer, std::vector<std::string> stops, std::vector<int32_t> shown)
    : tokenizer_(tokenizer), stops_(std::move(stops)), shown_(std::move(shown)) {
  // Skip special tokens as generate's text does (the eos token is generated but never shown).
  if (tokenizer_) decoder_ = std::make_unique<StreamDecoder>(*tokenizer_, /*skip_special=*/true);
}

// How much of decoded_ may be sent: not past a stop string's start, and not into a tail that
// is the beginning of a stop string (the next token may complete it).
size_t ChoiceText::safe_end() const {
  size_t end = decoded_.size();
  for (const auto& s : stops_) {
    const size_t from = sent_.size() >= s.size() ? sent_.size() - s.size() + 1 : 0;
    end = std::min(end, decoded_.find(s, from));
    const size_t longest = std::min(s.size() - 1, decoded_.size());
    for (size_t k = longest; k > 0; --k)
      if (decoded_.compare(decoded_.size() - k, k, s, 0, k) == 0) {
        end = std::min(end, decoded_.size() - k);
        break;
      }
  }
  return std::max(end, sent_.size());
}

bool ChoiceText::shown(int32_t id) const {
  return std::find(shown_.begin(), shown_.end(), id) != shown_.end();
}

std::string ChoiceText::final_text(size_t text_limit) const {
  std::string text;
  size_t plain = 0;  // bytes of the text without the shown tokens
  size_t run = 0;
  auto add_run = [&](size_t end) {
    std::string piece = tokenizer_->decode(std::span<const int32_t>(tokens_).subspan(run, end - run), true);
    if (text_limit != std::string::npos && plain + piece.size() > text_limit) piece.resize(text_limit - plain);
    plain += piece.size();
    text += piece;
  };
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (!shown(tokens_[i])) continue;
    add_run(i);
    run = i + 1;
    if (text_limit != std::string::npos && plain >= text_limit) return text;
    const int32_t one[1] = {tokens_[i]};
    text += tokenizer_->decode(std::span<const int32_t>(one, 1), false);
  }
  add_run(tokens_.size());
  return text;
}

std::string ChoiceText::push(int32_t id) {
  tokens_.push_back(id);
  if (!decoder_) return "";
  if (shown(id)) {
    // A shown special token cuts the byte stream: what the decoder holds is complete text.
    decoded_ += decoder_->flush();
    const int32_t one[1] = {id};
    decoded_ += tokenizer_->decode(std::span<const int32_t>(one, 1), false);
    decoder_ = std::make_unique<StreamDecoder>(*tokenizer_, /*skip_special=*/true);
  } else {
    decoded_ += decoder_->push(id);
  }
  ends_.push_back(decoded_.size());
  const size_t end = safe_end();
  std::string delta = decoded_.substr(sent_.size(), end - sent_.size());
  sent_ += delta;
  return delta;
}

std::string ChoiceText::finish(size_t text_limit) {
  if (!tokenizer_) return "";
  // The final text is computed exactly as generate computes it, not from the stream pieces.
  std::string text;
  if (shown_.empty()) {
    text = tokenizer_->decode(tokens_, true);
    if (text_limit != std::string::npos && text_limit < text.size()) text.resize(text_limit);
  } else {
    text = final_text(text_limit);
  }
  std::string delta = text.size() > sent_.size() ? text.substr(sent_.size()) : "";
  sent_ += delta;
  return delta;
}

int64_t ChoiceText::tokens_until(size_t text_end) const {
  if (text_end == 0) return 0;
  const auto it = std::lower_bound(ends_.begin(), ends_.end(), text_end);
  return it == ends_.end() ? static_cast<int64_t>(tokens_.size())
                           : static_cast<int64_t>(it - ends_.begin()) + 1;
}

}  // namespace lockstep::server
