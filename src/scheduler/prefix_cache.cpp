#include "scheduler/prefix_cache.h"

#include <algorithm>

namespace lockstep {

void PrefixCache::insert(std::vector<int32_t> tokens, std::unique_ptr<SequenceState> state) {
  if (max_entries_ == 0 || tokens.empty()) return;
  // The same tokens sent again replace their entry instead of crowding out others.
  entries_.remove_if([&](const Entry& e) { return e.tokens == tokens; });
  entries_.push_front({std::move(tokens), std::move(state)});
  while (entries_.size() > max_entries_) entries_.pop_back();
}

std::unique_ptr<SequenceState> PrefixCache::lookup(const std::vector<int32_t>& prompt) {
  auto best = entries_.end();
  int64_t best_len = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const auto& t = it->tokens;
    const size_t common =
        std::mismatch(t.begin(), t.end(), prompt.begin(), prompt.end()).first - t.begin();
    // Reusable: within the prompt minus its last token, and no shorter than the entry can be
    // truncated to (a recurrent state cannot go back past its rollback floor).
    const int64_t len = std::min<int64_t>(static_cast<int64_t>(common),
                                          static_cast<int64_t>(prompt.size()) - 1);
    if (len > best_len && len >= it->state->rollback_floor) {
      best = it;
      best_len = len;
    }
  }
  if (best == entries_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, best);  // most recently used
  return model_.fork(*entries_.front().state, best_len);
}

bool PrefixCache::evict_one() {
  if (entries_.empty()) return false;
  entries_.pop_back();
  return true;
}

int64_t PrefixCache::blocks() const {
  int64_t n = 0;
  for (const auto& e : entries_) n += static_cast<int64_t>(e.state->kv_blocks.size());
  return n;
}

}  // namespace lockstep
