// Earlier requests' KV kept for reuse: a new request whose prompt starts with cached tokens gets a
// sequence that already holds them and prefills only the rest. The cached KV holds the bits a
// recompute would write (prefill is invariant to chunking and batching), so a hit changes speed,
// never tokens. Cached blocks are shared through the KV pool's reference counts, not copied: a
// block held by the cache and by running sequences is stored, and counted, once.
//
// Two kinds, by what a model's sequence state is:
// - attention-only models (BlockPrefixCache): every full block is cached under a hash of its
//   tokens and of the blocks before it, so a request reuses every full block of the longest cached
//   prefix, whoever computed it (vLLM's prefix caching);
// - recurrent models (SnapshotPrefixCache): a Gated DeltaNet state exactly represents one length
//   only, so whole states are kept (entries) and reused at a length they can return to.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "models/model.h"

namespace lockstep {

class PrefixCache {
 public:
  virtual ~PrefixCache() = default;
  // Keeps what `state` holds of `tokens` (its first state.length tokens, which it holds exactly).
  // The state stays its holder's; the cache takes its own references.
  virtual void insert(std::span<const int32_t> tokens, const SequenceState& state) = 0;
  // A new sequence holding the longest reusable prefix of `tokens`, at most tokens.size() - 1 of
  // them (one remains to run); nullptr when nothing is reusable.
  virtual std::unique_ptr<SequenceState> lookup(std::span<const int32_t> tokens) = 0;
  // Evicts least recently used entries until the pool has `free_blocks` free; false when it
  // cannot (what the cache holds is in use by running sequences too, or not enough).
  virtual bool free_up(int64_t free_blocks) = 0;
  // KV blocks the cache holds (each once, shared with running sequences or not).
  virtual int64_t blocks() const = 0;
  // Of those, the blocks evicting everything would give back to the pool (nobody else holds).
  virtual int64_t reclaimable_blocks() const = 0;
};

// The cache that suits `model` (a snapshot cache of at most `max_snapshots` entries when the
// model keeps recurrent state, else a block cache bounded by the pool).
std::unique_ptr<PrefixCache> make_prefix_cache(Model& model, size_t max_snapshots);

// The hash naming a full block of tokens that follows the blocks named by `parent` (kNoBlocks for
// the first block). Hashes may collide; the caches compare the tokens too.
inline constexpr uint64_t kNoBlocks = 0x6c6f636b73746570ull;
uint64_t block_chain_hash(uint64_t parent, std::span<const int32_t> block);

}  // namespace lockstep
