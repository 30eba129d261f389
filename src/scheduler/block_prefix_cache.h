// The prefix cache of attention-only models: full KV blocks under a hash chain (vLLM's automatic
// prefix caching). Block i of a sequence is cached under block_chain_hash(hash of blocks 0..i-1,
// its tokens), so a lookup walks the prompt block by block and reuses every full block of the
// longest cached prefix, whichever requests computed them. Only full blocks are cached: a
// sequence given them writes its next position into a new block of its own, never into one it
// shares. Eviction takes the blocks that have been held by the cache alone the longest (the
// pool keeps that order: KvPool::oldest_cached_only), deepest first within a sequence, so it
// costs nothing per block it skips and always gives memory back.
#pragma once

#include <unordered_map>
#include <vector>

#include "scheduler/prefix_cache.h"

namespace lockstep {

class BlockPrefixCache final : public PrefixCache {
 public:
  explicit BlockPrefixCache(Model& model);
  ~BlockPrefixCache() override;
  void insert(std::span<const int32_t> tokens, const SequenceState& state) override;
  std::unique_ptr<SequenceState> lookup(std::span<const int32_t> tokens) override;
  bool free_up(int64_t free_blocks) override;
  int64_t blocks() const override { return static_cast<int64_t>(nodes_.size()); }
  int64_t reclaimable_blocks() const override { return pool_.cached_only_blocks(); }

 private:
  struct Node {
    int32_t block = -1;           // in the model's KvPool; the cache holds one marked reference
    uint64_t parent = 0;          // hash of the blocks before it (kNoBlocks for the first)
    std::vector<int32_t> tokens;  // its tokens, compared on every hit (hashes may collide)
  };
  // The cached node for `hash` when it holds exactly `tokens` after `parent`; else nullptr.
  const Node* find(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) const;
  void evict(int32_t block);

  Model& model_;
  KvPool& pool_;
  // A node whose parent was evicted stays until it is evicted itself (it is usually first: a
  // sequence lets go of its deeper blocks first); should its parent's tokens be cached again, it
  // is found again, its bits being a function of the token prefix alone.
  std::unordered_map<uint64_t, Node> nodes_;
  std::unordered_map<int32_t, uint64_t> by_block_;
};

}  // namespace lockstep
