// Streaming decode. Each push re-decodes a short window (one context id plus the ids since the
// last cut) and returns the new text beyond what was already returned, minus a tail that later
// ids could still change: trailing U+FFFD (an unfinished UTF-8 sequence under ByteLevel) and a
// pending run of <0xNN> tokens under ByteFallback. The window is cut after an id whose own decode
// is non-empty and that leaves nothing held back; that id stays as context so that decoders that
// treat the first token specially (Strip, Metaspace) see the same text as in a one-shot decode.
#include "tokenizer/tokenizer.h"

namespace lockstep {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

size_t stable_end(const std::string& text) {
  size_t end = text.size();
  while (end >= kReplacement.size() &&
         std::string_view(text).substr(end - kReplacement.size()) == kReplacement)
    end -= kReplacement.size();
  return end;
}

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tok_(tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(int32_t id) {
  // An id that decodes to nothing must not end a pending byte run either: skip it entirely.
  if (!tok_.contains(id) || (skip_special_ && tok_.is_special(id))) return {};
  window_.push_back(id);
  if (tok_.is_fallback_byte(id)) return {};
  const std::string text = tok_.decode(window_, skip_special_);
  if (text.compare(0, context_text_.size(), context_text_) != 0) return {};
  const size_t from = context_text_.size() + emitted_;
  const size_t end = stable_end(text);
  std::string out;
  if (end > from) {
    out = text.substr(from, end - from);
    emitted_ += out.size();
  }
  if (end == text.size()) {
    const int32_t last[1] = {id};
    std::string own = tok_.decode(last, skip_special_);
    if (!own.empty() && !tok_.is_fallback_byte(id)) {
      window_.assign(1, id);
      context_text_ = std::move(own);
      emitted_ = 0;
    }
  }
  return out;
}

std::string StreamDecoder::pending() const {
  const std::string text = tok_.decode(window_, skip_special_);
  const size_t from = context_text_.size() + emitted_;
  return from < text.size() ? text.substr(from) : std::string();
}

std::string StreamDecoder::flush() {
  std::string out = pending();
  window_.clear();
  context_text_.clear();
  emitted_ = 0;
  return out;
}

}  // namespace lockstep
