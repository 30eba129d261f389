// Fuzzes encode/decode on the two seed tokenizers in fuzz/corpus/load (byte-level and
// SentencePiece-style). The first input byte picks the tokenizer, the rest is the text.
// Checked: no crash, ids in range, decode output is valid UTF-8, streaming equals one-shot.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tokenizer/tokenizer.h"
#include "core/utf8.h"

namespace {

std::unique_ptr<lockstep::Tokenizer> load(const char* file) {
  std::ifstream in(std::string(LOCKSTEP_FUZZ_SEEDS) + "/" + file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return lockstep::Tokenizer::from_json(s.str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto byte_level = load("byte_level.json");
  static const auto sentencepiece = load("sentencepiece.json");
  if (size == 0) return 0;
  const auto& tok = (data[0] & 1) ? *sentencepiece : *byte_level;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  for (bool special : {false, true}) {
    const auto ids = tok.encode(text, special);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    const std::string once = tok.decode(ids);
    if (!lockstep::utf8::is_valid(once)) std::abort();
    lockstep::StreamDecoder stream(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    if (streamed != once) std::abort();
  }
  // Arbitrary ids (two input bytes each) through decode and the stream decoder.
  std::vector<int32_t> ids;
  for (size_t i = 1; i + 1 < size; i += 2) ids.push_back((data[i] | data[i + 1] << 8) % 300);
  const std::string once = tok.decode(ids);
  lockstep::StreamDecoder stream(tok);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  if (streamed + stream.flush() != once) std::abort();
  return 0;
}
