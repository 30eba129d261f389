// Prompt lookup: find the latest earlier occurrence of the sequence's last n tokens (n from
// max_ngram down to 1) in the prompt and output, and propose the tokens that followed it. No model.
#pragma once

#include "decode/speculative/drafter.h"

namespace lockstep {

class LookupDrafter final : public Drafter {
 public:
  explicit LookupDrafter(int max_ngram = 3) : max_ngram_(max_ngram) {}
  std::string name() const override { return "lookup"; }
  std::vector<int32_t> propose(std::span<const int32_t> history, int64_t prompt_len,
                               int k) override;

 private:
  int max_ngram_;
};

}  // namespace lockstep
