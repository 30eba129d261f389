// How long a prompt text may be before it is tokenized. Encoding a 60 MB prompt only to refuse it
// as over the context costs seconds of CPU and gigabytes of memory; a byte limit refuses it at once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tokenizer/tokenizer.h"

namespace lockstep::server {

// context_tokens × the most bytes one vocabulary entry decodes to × 4. Every token of a
// tokenizer that keeps its input (byte-level BPE, SentencePiece) covers at most that many bytes
// of normalized text, and normalizers shrink text at most 3x (NFKC composing Hangul jamo), so a
// longer text cannot fit the context.
size_t prompt_byte_limit(const Tokenizer& tokenizer, int64_t context_tokens);

}  // namespace lockstep::server
