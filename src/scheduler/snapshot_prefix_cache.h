// The prefix cache of models with recurrent state (Qwen3.5 hybrids): whole sequence states
// (entries), because a Gated DeltaNet / conv state exactly represents one length only; an entry
// can serve any length it can be truncated back to (its rollback floor up to its length). An
// entry is a fork (Model::fork): it shares its full KV blocks with the sequence it came from and
// with the requests that reuse it, and owns a copy of its partly filled last block and of the
// recurrent state. Entries are indexed by the hash of the full blocks below their rollback floor
// (every prompt the entry can serve starts with them), so a lookup hashes the prompt block by
// block and compares tokens only with entries under one of those hashes.
#pragma once

#include <list>
#include <unordered_map>
#include <vector>

#include "scheduler/prefix_cache.h"

namespace lockstep {

class SnapshotPrefixCache final : public PrefixCache {
 public:
  SnapshotPrefixCache(Model& model, size_t max_entries);
  ~SnapshotPrefixCache() override;
  void insert(std::span<const int32_t> tokens, const SequenceState& state) override;
  std::unique_ptr<SequenceState> lookup(std::span<const int32_t> tokens) override;
  bool free_up(int64_t free_blocks) override;
  int64_t blocks() const override { return pool_.cached_blocks(); }
  int64_t reclaimable_blocks() const override { return pool_.cached_only_blocks(); }

 private:
  struct Entry {
    std::vector<int32_t> tokens;  // what `state` holds, exactly
    std::unique_ptr<SequenceState> state;
    uint64_t key = 0;  // chain hash of its full blocks below state->rollback_floor
  };
  using Entries = std::list<Entry>;  // most recently used first

  uint64_t key_of(std::span<const int32_t> tokens, int64_t floor) const;
  // Drops an entry: its blocks' cache marks, then its state (which lets go of them).
  void erase(Entries::iterator it);
  // Evicts least recently used entries other than `keep` until a block is free; false if none.
  bool free_one_block(const Entry* keep);

  Model& model_;
  KvPool& pool_;
  size_t max_entries_;
  Entries entries_;
  std::unordered_multimap<uint64_t, Entries::iterator> index_;
};

}  // namespace lockstep
