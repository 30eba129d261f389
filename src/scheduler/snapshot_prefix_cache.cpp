#include "scheduler/snapshot_prefix_cache.h"

#include <algorithm>

namespace lockstep {

SnapshotPrefixCache::SnapshotPrefixCache(Model& model, size_t max_entries)
    : model_(model), pool_(model.kv_pool()), max_entries_(max_entries) {}

SnapshotPrefixCache::~SnapshotPrefixCache() {
  while (!entries_.empty()) erase(entries_.begin());
}

uint64_t SnapshotPrefixCache::key_of(std::span<const int32_t> tokens, int64_t floor) const {
  const int64_t B = pool_.block_tokens();
  uint64_t h = kNoBlocks;
  for (int64_t i = 0; i < floor / B; ++i) h = block_chain_hash(h, tokens.subspan(i * B, B));
  return h;
}

void SnapshotPrefixCache::erase(Entries::iterator it) {
  const auto [first, last] = index_.equal_range(it->key);
  for (auto i = first; i != last; ++i)
    if (i->second == it) {
      index_.erase(i);
      break;
    }
  for (int32_t b : it->state->kv_blocks) pool_.unmark_cached(b);
  entries_.erase(it);  // its state lets go of its blocks and recurrent state
}

bool SnapshotPrefixCache::free_one_block(const Entry* keep) {
  while (pool_.free_blocks() < 1) {
    auto victim = entries_.end();
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
      if (&*it != keep) {
        victim = std::prev(it.base());
        break;
      }
    if (victim == entries_.end()) return false;
    erase(victim);
  }
  return true;
}

void SnapshotPrefixCache::insert(std::span<const int32_t> tokens, const SequenceState& state) {
  if (max_entries_ == 0 || state.length == 0 || state.length > static_cast<int64_t>(tokens.size()))
    return;
  const std::span<const int32_t> held = tokens.first(static_cast<size_t>(state.length));
  const uint64_t key = key_of(held, state.rollback_floor);
  // The same tokens sent again replace their entry instead of crowding out others.
  const auto [first, last] = index_.equal_range(key);
  for (auto i = first; i != last; ++i)
    if (std::equal(held.begin(), held.end(), i->second->tokens.begin(), i->second->tokens.end())) {
      erase(i->second);
      break;
    }
  // The fork copies the partly filled last block: make room for it among older entries.
  if (state.length % pool_.block_tokens() != 0 && !free_one_block(nullptr)) return;
  entries_.push_front({{held.begin(), held.end()}, model_.fork(state, state.length), key});
  for (int32_t b : entries_.front().state->kv_blocks) pool_.mark_cached(b);
  index_.emplace(key, entries_.begin());
  while (entries_.size() > max_entries_) erase(std::prev(entries_.end()));
}

std::unique_ptr<SequenceState> SnapshotPrefixCache::lookup(std::span<const int32_t> tokens) {
  if (tokens.empty()) return nullptr;
  const int64_t B = pool_.block_tokens();
  const int64_t most = static_cast<int64_t>(tokens.size()) - 1;  // one token left to run
  // An entry reusable for `tokens` shares them up to its floor, so its key is the hash of some
  // whole number of the prompt's first blocks, at most `most` tokens' worth.
  auto best = entries_.end();
  int64_t best_len = 0;
  uint64_t h = kNoBlocks;
  for (int64_t blocks = 0;; ++blocks) {
    const auto [first, last] = index_.equal_range(h);
    for (auto i = first; i != last; ++i) {
      const Entry& e = *i->second;
      const size_t common =
          std::mismatch(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end()).first -
          e.tokens.begin();
      const int64_t len = std::min<int64_t>(static_cast<int64_t>(common), most);
      if (len > best_len && len >= e.state->rollback_floor) {
        best = i->second;
        best_len = len;
      }
    }
    if ((blocks + 1) * B > most) break;
    h = block_chain_hash(h, tokens.subspan(blocks * B, B));
  }
  if (best == entries_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, best);  // most recently used
  // The fork may copy the block best_len falls in; an older entry makes room if needed.
  if (best_len % B != 0 && !free_one_block(&*best)) return nullptr;
  return model_.fork(*best->state, best_len);
}

bool SnapshotPrefixCache::free_up(int64_t free_blocks) {
  while (pool_.free_blocks() < free_blocks && !entries_.empty()) erase(std::prev(entries_.end()));
  return pool_.free_blocks() >= free_blocks;
}

}  // namespace lockstep
