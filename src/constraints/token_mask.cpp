// TokenMask and ContextMaskCache (see token_mask.h).
#include "constraints/token_mask.h"

#include <algorithm>
#include <bit>

namespace lockstep::constraints {

void TokenMask::resize(int32_t size) {
  size_ = size;
  words_.assign((static_cast<size_t>(size) + 63) / 64, 0);
}

void TokenMask::clear() { std::fill(words_.begin(), words_.end(), 0); }

void TokenMask::merge(const TokenMask& other) {
  for (size_t i = 0; i < words_.size(); ++i) words_[i] |= other.words_[i];
}

int64_t TokenMask::count() const {
  int64_t n = 0;
  for (uint64_t w : words_) n += std::popcount(w);
  return n;
}

ContextMaskCache::ContextMaskCache(const Grammar& grammar, const TokenVocabulary& vocab, int depth)
    : grammar_(grammar), vocab_(vocab), depth_(static_cast<size_t>(std::max(depth, 1))), walker_(grammar) {}

size_t ContextMaskCache::size() const {
  std::lock_guard lock(mutex_);
  return cache_.size();
}

std::shared_ptr<const ContextTokens> ContextMaskCache::get(const Matcher& matcher,
                                                           Matcher::StackId s) {
  std::vector<uint32_t> positions;
  bool bottom = false;
  for (Matcher::StackId x = s;; x = matcher.parent(x)) {
    if (x == Matcher::kBottom) {
      bottom = true;
      break;
    }
    if (positions.size() == depth_) break;
    positions.push_back(matcher.position(x));
  }
  std::string key(reinterpret_cast<const char*>(positions.data()), positions.size() * sizeof(uint32_t));
  key.push_back(bottom ? 'b' : 'u');
  std::lock_guard lock(mutex_);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  auto tokens = compute(positions, bottom);
  cache_.emplace(std::move(key), tokens);
  return tokens;
}

namespace {

struct Walk {
  Matcher& m;
  const TokenVocabulary& vocab;
  std::vector<int32_t> accepted, uncertain;

  // The tokens below `node` (whose bytes led to the live state `state`). `past_context`: some
  // state on the way had returned below the known context, so a token that fails in the
  // context may still be accepted by the real stack: uncertain, not rejected.
  void visit(uint32_t node, Matcher::StateId state, bool past_context) {
    const auto& nodes = vocab.nodes();
    const auto ids = vocab.sorted_ids();
    past_context = past_context || m.reached_unknown(state);
    const TokenVocabulary::Node n = nodes[node];
    for (uint32_t c = n.first_child; c < n.first_child + n.child_count; ++c) {
      const TokenVocabulary::Node child = nodes[c];
      const Matcher::StateId next = m.advance(state, child.byte);
      if (next == Matcher::kDead) {
        if (past_context) uncertain.insert(uncertain.end(), ids.begin() + child.begin, ids.begin() + child.end);
        continue;
      }
      accepted.insert(accepted.end(), ids.begin() + child.begin, ids.begin() + child.own_end);
      if (child.child_count) visit(c, next, past_context);
    }
  }
};

}  // namespace

std::shared_ptr<const ContextTokens> ContextMaskCache::compute(const std::vector<uint32_t>& positions,
                                                               bool bottom) {
  Matcher::StackId s = bottom ? Matcher::kBottom : Matcher::kUnknown;
  for (size_t i = positions.size(); i-- > 0;) s = walker_.push(positions[i], s);
  Walk walk{walker_, vocab_, {}, {}};
  walk.visit(0, walker_.state_of(s), false);
  auto out = std::make_shared<ContextTokens>();
  const size_t v = static_cast<size_t>(vocab_.size());
  if (walk.accepted.size() * 32 >= v) {
    out->dense = true;
    out->accepted_bits.resize(vocab_.size());
    for (int32_t id : walk.accepted) out->accepted_bits.set(id);
  } else {
    out->accepted_ids = std::move(walk.accepted);
  }
  out->uncertain = std::move(walk.uncertain);
  return out;
}

}  // namespace lockstep::constraints
