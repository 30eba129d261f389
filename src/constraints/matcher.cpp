// Matcher: stack interning, expansion and byte transitions (see matcher.h).
#include "constraints/matcher.h"

#include <algorithm>

namespace lockstep::constraints {

size_t Matcher::VecHash::operator()(const std::vector<uint32_t>& v) const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ v.size();
  for (uint32_t x : v) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
  }
  return static_cast<size_t>(h ^ (h >> 32));
}

Matcher::Matcher(const Grammar& grammar) : grammar_(grammar) {
  nodes_.push_back({UINT32_MAX, kBottom});   // kBottom
  nodes_.push_back({UINT32_MAX, kUnknown});  // kUnknown
  expansions_.resize(2);
  expansions_[kBottom] = {kBottom};
  expansions_[kUnknown] = {kUnknown};
  expanded_ = {1, 1};
  sets_.emplace_back();  // kDead
  set_index_.emplace(std::vector<uint32_t>{}, kDead);
}

Matcher::StackId Matcher::push(uint32_t position, StackId parent) {
  const uint64_t key = (static_cast<uint64_t>(position) << 32) | parent;
  auto [it, inserted] = node_index_.try_emplace(key, static_cast<StackId>(nodes_.size()));
  if (inserted) {
    nodes_.push_back({position, parent});
    expansions_.emplace_back();
    expanded_.push_back(0);
  }
  return it->second;
}

const std::vector<Matcher::StackId>& Matcher::expand(StackId s) {
  if (expanded_[s]) return expansions_[s];
  const Node node = nodes_[s];
  const Element& el = grammar_.elements[node.position];
  std::vector<StackId> out;
  switch (el.kind) {
    case Element::Kind::kBytes:
      out.push_back(s);
      break;
    case Element::Kind::kEnd:
      out = expand(node.parent);  // copy: expand may grow expansions_
      break;
    case Element::Kind::kRule: {
      const bool tail = grammar_.elements[node.position + 1].kind == Element::Kind::kEnd;
      const StackId cont = tail ? node.parent : push(node.position + 1, node.parent);
      for (uint32_t start : grammar_.rule_alts[el.value]) {
        const std::vector<StackId>& sub = expand(push(start, cont));
        out.insert(out.end(), sub.begin(), sub.end());
      }
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
      break;
    }
  }
  expanded_[s] = 1;
  expansions_[s] = std::move(out);
  return expansions_[s];
}

Matcher::StateId Matcher::intern(std::vector<uint32_t>& set) {
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  auto it = set_index_.find(set);
  if (it != set_index_.end()) return it->second;
  const StateId id = static_cast<StateId>(sets_.size());
  sets_.push_back(set);
  set_index_.emplace(set, id);
  return id;
}

Matcher::StateId Matcher::start() {
  if (start_ != UINT32_MAX) return start_;
  std::vector<uint32_t> set;
  for (uint32_t alt_start : grammar_.rule_alts[grammar_.root]) {
    const auto& sub = expand(push(alt_start, kBottom));
    set.insert(set.end(), sub.begin(), sub.end());
  }
  start_ = intern(set);
  return start_;
}

Matcher::StateId Matcher::state_of(StackId s) {
  std::vector<uint32_t> set = expand(s);
  return intern(set);
}

Matcher::StateId Matcher::advance(StateId state, uint8_t byte) {
  const uint64_t key = (static_cast<uint64_t>(state) << 8) | byte;
  auto it = transitions_.find(key);
  if (it != transitions_.end()) return it->second;
  scratch_.clear();
  // Index-based: expand() and push() may reallocate sets_/nodes_ storage.
  for (size_t i = 0; i < sets_[state].size(); ++i) {
    const StackId s = sets_[state][i];
    if (s == kBottom || s == kUnknown) continue;
    const Node node = nodes_[s];
    if (!grammar_.bytes_at(node.position).test(byte)) continue;
    const StackId next = push(node.position + 1, node.parent);
    const auto& sub = expand(next);
    scratch_.insert(scratch_.end(), sub.begin(), sub.end());
  }
  std::vector<uint32_t> set(scratch_);
  const StateId out = intern(set);
  transitions_.emplace(key, out);
  return out;
}

Matcher::StateId Matcher::advance(StateId state, std::string_view bytes) {
  for (unsigned char c : bytes) {
    if (state == kDead) return kDead;
    state = advance(state, c);
  }
  return state;
}

bool Matcher::reached_unknown(StateId state) const {
  const auto& s = sets_[state];
  return std::binary_search(s.begin(), s.end(), kUnknown);
}

bool Matcher::has_ready(StateId state) const {
  const auto& s = sets_[state];
  for (StackId x : s)
    if (x != kBottom && x != kUnknown) return true;
  return false;
}

}  // namespace lockstep::constraints
