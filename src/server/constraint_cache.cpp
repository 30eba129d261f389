#include "server/constraint_cache.h"

#include <algorithm>

#include "decode/constraint_vocab.h"

namespace lockstep::server {

namespace {

// Everything that changes the compiled constraint: kind, options, vocabulary and the text.
std::string cache_key(const constraints::ConstraintSpec& spec, bool with_eos) {
  std::string key;
  key += static_cast<char>('0' + static_cast<int>(spec.kind));
  key += with_eos ? 'e' : 'n';
  key += std::to_string(spec.json.max_whitespace) + ',' +
         std::to_string(static_cast<int>(spec.json.dialect)) + ',' +
         (spec.json.one_of_as_any_of ? '1' : '0') + '\n';
  key += spec.text;
  return key;
}

}  // namespace

ConstraintCache::ConstraintCache(const Tokenizer& tokenizer, std::vector<int32_t> eos_ids,
                                 int64_t model_vocab, size_t capacity, std::vector<int32_t> shown)
    : tokenizer_(tokenizer), eos_ids_(std::move(eos_ids)), model_vocab_(model_vocab),
      capacity_(std::max<size_t>(capacity, 1)), shown_(std::move(shown)) {
  for (int32_t id : end_of_turn_ids(tokenizer_))
    if (std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end()) eos_ids_.push_back(id);
}

std::shared_ptr<const constraints::TokenVocabulary> ConstraintCache::vocabulary(bool with_eos) {
  const int i = with_eos ? 1 : 0;
  std::call_once(vocab_once_[i], [&] {
    const std::vector<int32_t> none;
    vocab_[i] = token_vocabulary(tokenizer_, with_eos ? eos_ids_ : none, model_vocab_);
  });
  return vocab_[i];
}

std::shared_ptr<const constraints::TokenVocabulary> ConstraintCache::shown_vocabulary(bool with_eos) {
  if (shown_.empty()) return vocabulary(with_eos);
  const int i = with_eos ? 1 : 0;
  std::call_once(shown_once_[i], [&] {
    const auto& base = *vocabulary(with_eos);
    std::vector<std::string> bytes(static_cast<size_t>(base.size()));
    for (int32_t id = 0; id < base.size(); ++id) bytes[static_cast<size_t>(id)] = base.bytes(id);
    for (int32_t id : shown_) {
      const int32_t one[1] = {id};
      if (id >= 0 && id < base.size()) bytes[static_cast<size_t>(id)] = tokenizer_.decode(std::span<const int32_t>(one, 1), false);
    }
    shown_vocab_[i] = std::make_shared<constraints::TokenVocabulary>(
        std::move(bytes), std::vector<int32_t>(base.eos_ids().begin(), base.eos_ids().end()));
  });
  return shown_vocab_[i];
}

std::shared_ptr<const constraints::Constraint> ConstraintCache::lookup(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

std::shared_ptr<const constraints::Constraint> ConstraintCache::insert(
    const std::string& key, std::shared_ptr<const constraints::Constraint> compiled) {
  std::lock_guard<std::mutex> lock(mu_);
  ++compiles_;
  auto it = index_.find(key);
  if (it != index_.end()) {
    it->second->second = compiled;
    lru_.splice(lru_.begin(), lru_, it->second);
  } else {
    lru_.emplace_front(key, compiled);
    index_[key] = lru_.begin();
    if (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  return compiled;
}

std::shared_ptr<const constraints::Constraint> ConstraintCache::get(
    const constraints::ConstraintSpec& spec, bool with_eos) {
  const std::string key = cache_key(spec, with_eos);
  if (auto hit = lookup(key)) return hit;
  // Compiled without the lock: a large schema must not stall other workers. Two workers that
  // miss on the same spec both compile it; the results are equal and the second insert wins.
  return insert(key, constraints::Constraint::compile(spec, vocabulary(with_eos)));
}

std::shared_ptr<const constraints::Constraint> ConstraintCache::get_built(
    const std::string& key, const std::function<constraints::Grammar()>& build, bool with_eos,
    bool shown) {
  // 'b' keeps built grammars apart from specs (whose keys start with the kind's digit).
  const std::string full =
      std::string("b") + (with_eos ? 'e' : 'n') + (shown ? 's' : 'p') + '\n' + key;
  if (auto hit = lookup(full)) return hit;
  return insert(full, constraints::Constraint::from_grammar(
                          build(), shown ? shown_vocabulary(with_eos) : vocabulary(with_eos)));
}

size_t ConstraintCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

size_t ConstraintCache::compiles() const {
  std::lock_guard<std::mutex> lock(mu_);
  return compiles_;
}

}  // namespace lockstep::server
