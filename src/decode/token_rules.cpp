#include "decode/token_rules.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace lockstep {

bool backend_sampling_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("LOCKSTEP_HOST_SAMPLING");
    return !(v && std::strcmp(v, "1") == 0);
  }();
  return on;
}

void TokenRules::add(const Sampler& sampler, const TokenHistory& history, int64_t V) {
  rules_.push_back(sampler.rule(history, static_cast<int64_t>(history.tokens.size()), V,
                                adjust_.emplace_back()));
}

void TokenRules::add_block(const Sampler& sampler, std::span<const int32_t> history,
                           int64_t prompt_len, std::span<const int32_t> drafts, int64_t V) {
  if (!sampler.params().has_penalties()) {
    // Without penalties a rule reads nothing of the history but its length.
    for (size_t i = 0; i <= drafts.size(); ++i) {
      rules_.push_back(sampler.rule({history, prompt_len},
                                    static_cast<int64_t>(history.size() + i), V,
                                    adjust_.emplace_back()));
    }
    return;
  }
  context_.assign(history.begin(), history.end());
  for (size_t i = 0;; ++i) {
    add(sampler, {context_, prompt_len}, V);
    if (i == drafts.size()) break;
    context_.push_back(drafts[i]);
  }
}

void TokenRules::set_allowed(size_t index, const constraints::TokenMask& allowed) {
  kernels::TokenRule& r = rules_.at(index);
  r.allowed = allowed.words().data();
  r.allowed_size = allowed.size();
  // An empty mask still forbids every id: the pointer must not read as "no mask".
  static const uint64_t kNone = 0;
  if (!r.allowed) r.allowed = &kNone;
}

int32_t chosen_token(const ForwardResult& out, int64_t row, Sampler& sampler,
                     const TokenHistory& history, int64_t V) {
  if (!out.tokens.empty() && out.tokens[row] >= 0) return out.tokens[row];
  LOCKSTEP_CHECK(static_cast<int64_t>(out.logits.size()) >= (row + 1) * V,
                 "a forward row has neither a chosen token nor logits");
  return sampler.choose({&out.logits[row * V], static_cast<size_t>(V)}, history,
                        static_cast<int64_t>(history.tokens.size()));
}

}  // namespace lockstep
