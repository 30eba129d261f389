#include "server/prompt_limit.h"

#include <algorithm>

namespace lockstep::server {

size_t prompt_byte_limit(const Tokenizer& tokenizer, int64_t context_tokens) {
  size_t longest = 1;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const int32_t one[] = {id};
    longest = std::max(longest, tokenizer.decode(one, false).size());
  }
  constexpr size_t kNormalizerShrink = 4;
  return static_cast<size_t>(std::max<int64_t>(context_tokens, 1)) * longest * kNormalizerShrink;
}

}  // namespace lockstep::server
