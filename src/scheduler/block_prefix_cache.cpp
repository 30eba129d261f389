#include "scheduler/block_prefix_cache.h"

#include <algorithm>
#include <unordered_set>

namespace lockstep {

BlockPrefixCache::BlockPrefixCache(Model& model) : model_(model), pool_(model.kv_pool()) {}

BlockPrefixCache::Node* BlockPrefixCache::find(uint64_t hash, uint64_t parent,
                                               std::span<const int32_t> tokens) {
  const auto it = nodes_.find(hash);
  if (it == nodes_.end() || it->second.parent != parent ||
      !std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin(), it->second.tokens.end()))
    return nullptr;
  return &it->second;
}

void BlockPrefixCache::touch(uint64_t hash, Node& n) {
  lru_.erase(lru_key(hash, n));
  n.last_used = clock_;
  lru_.insert(lru_key(hash, n));
}

void BlockPrefixCache::insert(std::span<const int32_t> tokens, const SequenceState& state) {
  const int64_t B = pool_.block_tokens();
  const int64_t full = std::min<int64_t>(state.length, static_cast<int64_t>(tokens.size())) / B;
  ++clock_;
  uint64_t parent = kNoBlocks;
  for (int64_t i = 0; i < full; ++i) {
    const std::span<const int32_t> block = tokens.subspan(i * B, B);
    const uint64_t hash = block_chain_hash(parent, block);
    if (Node* n = find(hash, parent, block)) {
      touch(hash, *n);  // computed before (maybe this very block, shared at admission)
    } else {
      if (nodes_.count(hash)) return;  // a different block under the same hash: stop here
      // Full blocks lie below the state's length: its holder never writes them again.
      Node node{state.kv_blocks[i], parent, i, {block.begin(), block.end()}, clock_, 0};
      pool_.retain(node.block);
      if (parent != kNoBlocks) ++nodes_.at(parent).children;
      lru_.insert(lru_key(hash, node));
      nodes_.emplace(hash, std::move(node));
    }
    parent = hash;
  }
}

std::unique_ptr<SequenceState> BlockPrefixCache::lookup(std::span<const int32_t> tokens) {
  if (tokens.empty()) return nullptr;
  const int64_t B = pool_.block_tokens();
  const int64_t most = (static_cast<int64_t>(tokens.size()) - 1) / B;  // one token left to run
  std::vector<int32_t> blocks;
  std::vector<uint64_t> chain;
  uint64_t parent = kNoBlocks;
  for (int64_t i = 0; i < most; ++i) {
    const std::span<const int32_t> block = tokens.subspan(i * B, B);
    const uint64_t hash = block_chain_hash(parent, block);
    const Node* n = find(hash, parent, block);
    if (!n) break;
    blocks.push_back(n->block);
    chain.push_back(hash);
    parent = hash;
  }
  if (blocks.empty()) return nullptr;
  ++clock_;
  for (uint64_t hash : chain) touch(hash, nodes_.at(hash));
  return model_.sequence_from_blocks(blocks, static_cast<int64_t>(blocks.size()) * B);
}

bool BlockPrefixCache::free_up(int64_t free_blocks) {
  // One pass in LRU order: evicting a leaf can make its parent a leaf, and the parent comes later
  // in the order (never older; deeper first at equal time).
  for (auto it = lru_.begin(); it != lru_.end() && pool_.free_blocks() < free_blocks;) {
    const uint64_t hash = std::get<2>(*it);
    Node& n = nodes_.at(hash);
    if (n.children > 0 || pool_.holders(n.block) > 1) {  // continued, or in use: keep
      ++it;
      continue;
    }
    it = lru_.erase(it);
    if (n.parent != kNoBlocks) --nodes_.at(n.parent).children;
    pool_.release(n.block);
    nodes_.erase(hash);
  }
  return pool_.free_blocks() >= free_blocks;
}

int64_t BlockPrefixCache::reclaimable_blocks() const {
  // A node is pinned while someone else holds its block or a block continuing its chain.
  std::unordered_set<uint64_t> pinned;
  for (const auto& [hash, n] : nodes_) {
    if (pool_.holders(n.block) == 1) continue;
    for (uint64_t h = hash; h != kNoBlocks && pinned.insert(h).second;) h = nodes_.at(h).parent;
  }
  return static_cast<int64_t>(nodes_.size() - pinned.size());
}

}  // namespace lockstep
