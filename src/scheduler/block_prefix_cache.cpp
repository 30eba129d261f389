#include "scheduler/block_prefix_cache.h"

#include <algorithm>

#include "core/error.h"

namespace lockstep {

BlockPrefixCache::BlockPrefixCache(Model& model) : model_(model), pool_(model.kv_pool()) {}

BlockPrefixCache::~BlockPrefixCache() {
  while (!by_block_.empty()) evict(by_block_.begin()->first);
}

const BlockPrefixCache::Node* BlockPrefixCache::find(uint64_t hash, uint64_t parent,
                                                     std::span<const int32_t> tokens) const {
  const auto it = nodes_.find(hash);
  if (it == nodes_.end() || it->second.parent != parent ||
      !std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin(), it->second.tokens.end()))
    return nullptr;
  return &it->second;
}

void BlockPrefixCache::insert(std::span<const int32_t> tokens, const SequenceState& state) {
  const int64_t B = pool_.block_tokens();
  const int64_t full = std::min<int64_t>(state.length, static_cast<int64_t>(tokens.size())) / B;
  uint64_t parent = kNoBlocks;
  for (int64_t i = 0; i < full; ++i) {
    const std::span<const int32_t> block = tokens.subspan(i * B, B);
    const uint64_t hash = block_chain_hash(parent, block);
    if (!find(hash, parent, block)) {  // else computed before (maybe this very block)
      if (nodes_.count(hash)) return;   // a different block under the same hash: stop here
      // Full blocks lie below the state's length: its holder never writes them again.
      const int32_t b = state.kv_blocks[i];
      LOCKSTEP_CHECK(!by_block_.count(b), "prefix cache: block ", b, " cached twice");
      pool_.retain(b);
      pool_.mark_cached(b);
      nodes_.emplace(hash, Node{b, parent, {block.begin(), block.end()}});
      by_block_.emplace(b, hash);
    }
    parent = hash;
  }
}

std::unique_ptr<SequenceState> BlockPrefixCache::lookup(std::span<const int32_t> tokens) {
  if (tokens.empty()) return nullptr;
  const int64_t B = pool_.block_tokens();
  const int64_t most = (static_cast<int64_t>(tokens.size()) - 1) / B;  // one token left to run
  std::vector<int32_t> blocks;
  uint64_t parent = kNoBlocks;
  for (int64_t i = 0; i < most; ++i) {
    const std::span<const int32_t> block = tokens.subspan(i * B, B);
    const uint64_t hash = block_chain_hash(parent, block);
    const Node* n = find(hash, parent, block);
    if (!n) break;
    blocks.push_back(n->block);
    parent = hash;
  }
  if (blocks.empty()) return nullptr;
  // Held by the new sequence, the blocks are no longer evictable; when it lets go they count as
  // the most recently used.
  return model_.sequence_from_blocks(blocks, static_cast<int64_t>(blocks.size()) * B);
}

void BlockPrefixCache::evict(int32_t block) {
  const auto it = by_block_.find(block);
  LOCKSTEP_CHECK(it != by_block_.end(), "prefix cache: block ", block, " is not cached");
  nodes_.erase(it->second);
  by_block_.erase(it);
  pool_.unmark_cached(block);
  pool_.release(block);
}

bool BlockPrefixCache::free_up(int64_t free_blocks) {
  while (pool_.free_blocks() < free_blocks) {
    const int32_t b = pool_.oldest_cached_only();
    if (b < 0) return false;
    evict(b);
  }
  return true;
}

}  // namespace lockstep
