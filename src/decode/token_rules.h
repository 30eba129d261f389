// The rules that let a backend choose a forward's tokens itself (ForwardItem::choose,
// Backend::choose_tokens), so that on a GPU only the ids cross to the host. A rule is the
// sampler's choice written down before the forward: Sampler::rule for the row's position and the
// exact history before it (drafts included), so the id the backend returns is the id
// Sampler::choose would give on the downloaded logits (tests/sampling, tests/cuda prove it).
#pragma once

#include <deque>
#include <span>
#include <vector>

#include "constraints/token_mask.h"
#include "kernels/token_choice.h"
#include "models/model.h"
#include "sampling/sampler.h"

namespace lockstep {

// False when LOCKSTEP_HOST_SAMPLING=1: every token is chosen by the host Sampler from downloaded
// logits (the path before backends chose tokens; kept to compare the two on a device).
bool backend_sampling_enabled();

// One forward item's rules and the penalty lists they point into (kept together so the spans
// stay valid until the forward has run).
class TokenRules {
 public:
  void clear() {
    rules_.clear();
    adjust_.clear();
  }
  // A row whose token nobody reads (prefill rows that are output only for their hidden state).
  void add_skip() { rules_.emplace_back().skip = true; }
  // The row choosing the token at `position` == history.tokens.size().
  void add(const Sampler& sampler, const TokenHistory& history, int64_t V);
  // A verify block's rows: row i chooses the token after history + drafts[0, i), for
  // i = 0 .. drafts.size() (the last row follows every draft).
  void add_block(const Sampler& sampler, std::span<const int32_t> history, int64_t prompt_len,
                 std::span<const int32_t> drafts, int64_t V);

  // Rule `index` chooses among the ids `allowed` permits (a constraint's mask at its position;
  // it must stay unchanged until the forward has run).
  void set_allowed(size_t index, const constraints::TokenMask& allowed);
  // Rule `index` wants no token (its row's token is decided without the logits).
  void set_skip(size_t index) {
    rules_.at(index) = {};
    rules_.at(index).skip = true;
  }

  std::span<const kernels::TokenRule> rules() const { return rules_; }
  size_t size() const { return rules_.size(); }
  bool empty() const { return rules_.empty(); }

 private:
  std::vector<kernels::TokenRule> rules_;
  std::deque<std::vector<kernels::TokenAdjust>> adjust_;  // a deque: elements never move
  std::vector<int32_t> context_;
};

// The token of output row `row` of `out`: the backend's choice when the item had rules,
// otherwise the sampler's on the row's downloaded logits (V floats).
int32_t chosen_token(const ForwardResult& out, int64_t row, Sampler& sampler,
                     const TokenHistory& history, int64_t V);

}  // namespace lockstep
