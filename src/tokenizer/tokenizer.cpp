// The encode and decode pipelines (loading lives in tokenizer_load.cpp).
#include "tokenizer/tokenizer.h"

#include <unordered_map>

#include "tokenizer/tokenizer_impl.h"
#include "core/utf8.h"

namespace lockstep {

Tokenizer::Tokenizer() : impl_(new Impl) {}
Tokenizer::~Tokenizer() = default;

namespace {

// Caches the ids of words already encoded in this call: natural text repeats most words, and
// BPE on a repeated word would redo the same merges.
class WordCache {
 public:
  explicit WordCache(const BpeModel& model) : model_(model) {}
  void encode(const std::string& word, std::vector<int32_t>& out) {
    if (word.size() > 64) {
      model_.tokenize(word, out);
      return;
    }
    auto it = cache_.find(word);
    if (it == cache_.end()) {
      std::vector<int32_t> ids;
      model_.tokenize(word, ids);
      it = cache_.emplace(word, std::move(ids)).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }

 private:
  const BpeModel& model_;
  std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view raw, bool add_special) const {
  const Impl& m = *impl_;
  const std::string text = utf8::is_valid(raw) ? std::string(raw) : utf8::sanitize(raw);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  WordCache cache(*m.model);
  std::vector<Piece> words;
  for (const auto& span : m.raw_matcher.split(text, m.added)) {
    if (span.token >= 0) {
      ids.push_back(m.added[span.token].id);
      continue;
    }
    std::string stretch = text.substr(span.b, span.e - span.b);
    m.normalizer->apply(stretch);
    for (const auto& inner : m.normalized_matcher.split(stretch, m.added)) {
      if (inner.token >= 0) {
        ids.push_back(m.added[inner.token].id);
        continue;
      }
      words.clear();
      words.push_back({stretch.substr(inner.b, inner.e - inner.b), span.b == 0 && inner.b == 0});
      m.pre_tokenizer->apply(words);
      for (const auto& w : words) cache.encode(w.text, ids);
    }
  }
  if (add_special) ids = m.post_processor->apply(std::move(ids));
  return ids;
}

std::optional<std::string_view> Tokenizer::Impl::piece(int32_t id) const {
  if (auto it = added_by_id.find(id); it != added_by_id.end()) {
    if (auto f = decode_form.find(id); f != decode_form.end()) return f->second;
    return added[it->second].content;
  }
  return model->vocab().token(id);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const auto p = impl_->piece(id);
    if (!p) continue;
    if (skip_special && is_special(id)) continue;
    tokens.emplace_back(*p);
  }
  return impl_->decoder->decode(std::move(tokens));
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_end; }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (auto it = impl_->added_by_content.find(std::string(token));
      it != impl_->added_by_content.end())
    return impl_->added[it->second].id;
  return impl_->model->vocab().find(token);
}

std::string Tokenizer::id_to_piece(int32_t id) const {
  if (auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end())
    return impl_->added[it->second].content;
  const auto p = impl_->model->vocab().token(id);
  return p ? std::string(*p) : std::string();
}

std::string Tokenizer::token_bytes(int32_t id) const {
  const auto p = impl_->piece(id);
  if (!p || is_special(id)) return {};
  return impl_->decoder->token_bytes(std::string(*p));
}

const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }
std::vector<int32_t> Tokenizer::eos_ids() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }

bool Tokenizer::is_special(int32_t id) const {
  // The reference skips by content: any id whose string is a special token's string.
  if (!impl_->piece(id)) return false;
  auto it = impl_->added_by_content.find(id_to_piece(id));
  return it != impl_->added_by_content.end() && impl_->added[it->second].special;
}

bool Tokenizer::contains(int32_t id) const { return impl_->piece(id).has_value(); }

bool Tokenizer::is_fallback_byte(int32_t id) const {
  if (!impl_->decoder->has_byte_fallback()) return false;
  const auto p = impl_->piece(id);
  return p && p->size() == 6 && p->compare(0, 3, "<0x") == 0 && (*p)[5] == '>';
}

}  // namespace lockstep
