// The constraint engine's view of a model's tokenizer: each id's output bytes and the ids that
// end an output. Built once per tokenizer and shared by every constraint compiled over it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "constraints/token_vocab.h"
#include "tokenizer/tokenizer.h"

namespace lockstep {

// The end-of-turn tokens a chat template writes after each message (<|im_end|>, <|eot_id|>,
// <end_of_turn>, ...), as far as the tokenizer knows them: an answer constrained inside a chat
// ends there, even when the model's config lists only its end-of-text token.
std::vector<int32_t> end_of_turn_ids(const Tokenizer& tokenizer);

// Ids [0, model_vocab): Tokenizer::token_bytes of each (empty past the tokenizer's vocabulary,
// so padded rows of a larger lm_head are never allowed). eos_ids: the tokens that end the
// output (the model's EOS ids, and end_of_turn_ids for chat); ids outside the vocabulary are
// dropped. The constraint allows them exactly when its grammar can end.
std::shared_ptr<const constraints::TokenVocabulary> token_vocabulary(
    const Tokenizer& tokenizer, std::span<const int32_t> eos_ids, int64_t model_vocab);

}  // namespace lockstep
