#include "tokenizer/vocab.h"

namespace lockstep {

void Vocab::insert(std::string token, int32_t id) {
  if (id < 0) return;
  if (static_cast<size_t>(id) >= to_token_.size()) {
    to_token_.resize(id + 1);
    present_.resize(id + 1, false);
  }
  to_token_[id] = token;
  present_[id] = true;
  to_id_.insert_or_assign(std::move(token), id);
}

}  // namespace lockstep
