#include "tokenizer/vocab.h"

namespace lockstep {

uint32_t Vocab::hash_of(std::string_view s) {
  // FNV-1a, then a final mix so that the low bits (the slot index) depend on every byte.
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  return static_cast<uint32_t>(h);
}

void Vocab::reserve(size_t n) {
  entries_.reserve(n);
  arena_.reserve(n * 8);
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  if (cap > slots_.size()) {
    slots_.assign(cap, 0);
    for (size_t i = 0; i < entries_.size(); ++i) {
      size_t s = entries_[i].hash & (cap - 1);
      while (slots_[s]) s = (s + 1) & (cap - 1);
      slots_[s] = static_cast<uint32_t>(i + 1);
    }
  }
}

void Vocab::grow() { reserve(entries_.size() * 2 + 8); }

std::optional<int32_t> Vocab::find(std::string_view token) const {
  if (slots_.empty()) return std::nullopt;
  const uint32_t h = hash_of(token);
  const size_t mask = slots_.size() - 1;
  for (size_t s = h & mask; slots_[s]; s = (s + 1) & mask) {
    const Entry& e = entries_[slots_[s] - 1];
    if (e.hash == h && text(e) == token) return e.id;
  }
  return std::nullopt;
}

void Vocab::insert(std::string_view token, int32_t id) {
  if (id < 0) return;
  if ((entries_.size() + 1) * 2 > slots_.size()) grow();
  const uint32_t h = hash_of(token);
  const size_t mask = slots_.size() - 1;
  size_t s = h & mask;
  for (; slots_[s]; s = (s + 1) & mask) {
    Entry& e = entries_[slots_[s] - 1];
    if (e.hash == h && text(e) == token) {
      // Same string again: the new id wins; the old id keeps its string for decoding.
      e.id = id;
      if (static_cast<size_t>(id) >= by_id_.size()) by_id_.resize(id + 1, -1);
      by_id_[id] = static_cast<int32_t>(slots_[s] - 1);
      return;
    }
  }
  const auto offset = static_cast<uint32_t>(arena_.size());
  arena_.append(token);
  entries_.push_back({offset, static_cast<uint32_t>(token.size()), h, id});
  slots_[s] = static_cast<uint32_t>(entries_.size());
  if (static_cast<size_t>(id) >= by_id_.size()) by_id_.resize(id + 1, -1);
  by_id_[id] = static_cast<int32_t>(entries_.size() - 1);
}

}  // namespace lockstep
