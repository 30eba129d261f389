#include "scheduler/prefix_cache.h"

#include "scheduler/block_prefix_cache.h"
#include "scheduler/snapshot_prefix_cache.h"

namespace lockstep {

namespace {
uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t block_chain_hash(uint64_t parent, std::span<const int32_t> block) {
  uint64_t h = mix(parent ^ 0x9e3779b97f4a7c15ull);
  for (int32_t t : block) h = mix(h ^ static_cast<uint32_t>(t));
  return h;
}

std::unique_ptr<PrefixCache> make_prefix_cache(Model& model, size_t max_snapshots) {
  if (model.new_sequence()->recurrent)  // state beyond the KV cache: whole snapshots only
    return std::make_unique<SnapshotPrefixCache>(model, max_snapshots);
  return std::make_unique<BlockPrefixCache>(model);
}

}  // namespace lockstep
