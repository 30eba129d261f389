// Finished sequences kept for their KV: a new request whose prompt starts with an entry's tokens
// gets a fork of that state and prefills only the rest. The forked KV holds the bits a recompute
// would write (prefill is invariant to chunking), so a hit changes speed, never tokens.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "models/model.h"

namespace lockstep {

class PrefixCache {
 public:
  PrefixCache(Model& model, size_t max_entries) : model_(model), max_entries_(max_entries) {}

  // Keeps `state`, which holds exactly `tokens` (its length), evicting the oldest entries.
  void insert(std::vector<int32_t> tokens, std::unique_ptr<SequenceState> state);
  // A new sequence holding the longest reusable prefix of `prompt` (at most prompt.size() - 1
  // tokens, so one remains to produce logits), or nullptr when nothing is reusable.
  std::unique_ptr<SequenceState> lookup(const std::vector<int32_t>& prompt);
  // Drops the least recently used entry; false when empty.
  bool evict_one();
  int64_t blocks() const;  // KV blocks held by entries
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    std::unique_ptr<SequenceState> state;
  };
  Model& model_;
  size_t max_entries_;
  std::list<Entry> entries_;  // most recently used first
};

}  // namespace lockstep
