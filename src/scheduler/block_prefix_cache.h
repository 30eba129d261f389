// The prefix cache of attention-only models: full KV blocks under a hash chain (vLLM's automatic
// prefix caching). Block i of a sequence is cached under block_chain_hash(hash of blocks 0..i-1,
// its tokens), so a lookup walks the prompt block by block and reuses every full block of the
// longest cached prefix, whichever requests computed them. Only full blocks are cached: a
// sequence given them writes its next position into a new block of its own, never into one it
// shares. Eviction takes least recently used leaves (a cached block whose chain continues stays
// while its continuation does) that nobody else holds, so it always gives memory back.
#pragma once

#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "scheduler/prefix_cache.h"

namespace lockstep {

class BlockPrefixCache final : public PrefixCache {
 public:
  explicit BlockPrefixCache(Model& model);
  void insert(std::span<const int32_t> tokens, const SequenceState& state) override;
  std::unique_ptr<SequenceState> lookup(std::span<const int32_t> tokens) override;
  bool free_up(int64_t free_blocks) override;
  int64_t blocks() const override { return static_cast<int64_t>(nodes_.size()); }
  int64_t reclaimable_blocks() const override;

 private:
  struct Node {
    int32_t block = -1;   // in the model's KvPool; the cache holds one reference
    uint64_t parent = 0;  // hash of the blocks before it (kNoBlocks for the first)
    int64_t depth = 0;    // blocks before it
    std::vector<int32_t> tokens;  // its tokens, compared on every hit (hashes may collide)
    uint64_t last_used = 0;
    int children = 0;     // cached blocks that continue its chain
  };
  // Least recently used first; at equal time deeper first, so the first is always a leaf (a
  // chain is touched whole, from its first block, so a block is never older than its children).
  using LruKey = std::tuple<uint64_t, int64_t, uint64_t>;  // (last_used, -depth, hash)
  static LruKey lru_key(uint64_t hash, const Node& n) { return {n.last_used, -n.depth, hash}; }

  // The cached node for `hash` when it holds exactly `tokens` after `parent`; else nullptr.
  Node* find(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
  void touch(uint64_t hash, Node& n);

  Model& model_;
  KvPool& pool_;
  std::unordered_map<uint64_t, Node> nodes_;
  std::set<LruKey> lru_;
  uint64_t clock_ = 0;
};

}  // namespace lockstep
