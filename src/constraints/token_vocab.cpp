// TokenVocabulary: the byte trie, built from the ids sorted by their bytes.
#include "constraints/token_vocab.h"

#include <algorithm>

#include "core/error.h"

namespace lockstep::constraints {

TokenVocabulary::TokenVocabulary(std::vector<std::string> bytes, std::vector<int32_t> eos_ids)
    : bytes_(std::move(bytes)), eos_(std::move(eos_ids)) {
  std::sort(eos_.begin(), eos_.end());
  eos_.erase(std::unique(eos_.begin(), eos_.end()), eos_.end());
  for (int32_t id : eos_)
    if (id < 0 || id >= size()) fail("constraint vocabulary: EOS id ", id, " is outside [0, ", size(), ")");
  for (int32_t id = 0; id < size(); ++id)
    if (!bytes_[static_cast<size_t>(id)].empty() && !is_eos(id)) sorted_.push_back(id);
  std::stable_sort(sorted_.begin(), sorted_.end(),
                   [this](int32_t a, int32_t b) { return this->bytes(a) < this->bytes(b); });
  nodes_.emplace_back();
  build(0, 0, static_cast<uint32_t>(sorted_.size()), 0);
}

bool TokenVocabulary::is_eos(int32_t id) const {
  return std::binary_search(eos_.begin(), eos_.end(), id);
}

// Fills node `node` for the tokens sorted_[lo, hi), which all share their first `depth` bytes.
uint32_t TokenVocabulary::build(uint32_t node, uint32_t lo, uint32_t hi, size_t depth) {
  uint32_t own = lo;
  while (own < hi && bytes(sorted_[own]).size() == depth) ++own;
  // Group the rest by their byte at `depth`; allocate the children together so they are
  // contiguous, then fill each.
  std::vector<std::pair<uint32_t, uint32_t>> groups;
  for (uint32_t i = own; i < hi;) {
    const char b = bytes(sorted_[i])[depth];
    uint32_t j = i;
    while (j < hi && bytes(sorted_[j])[depth] == b) ++j;
    groups.emplace_back(i, j);
    i = j;
  }
  const uint32_t first = static_cast<uint32_t>(nodes_.size());
  nodes_.resize(nodes_.size() + groups.size());
  nodes_[node].begin = lo;
  nodes_[node].end = hi;
  nodes_[node].own_end = own;
  nodes_[node].first_child = first;
  nodes_[node].child_count = static_cast<uint32_t>(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const uint32_t child = first + static_cast<uint32_t>(g);
    nodes_[child].byte = static_cast<uint8_t>(bytes(sorted_[groups[g].first])[depth]);
    build(child, groups[g].first, groups[g].second, depth + 1);
  }
  return node;
}

}  // namespace lockstep::constraints
