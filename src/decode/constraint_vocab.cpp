#include "decode/constraint_vocab.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace lockstep {

std::vector<int32_t> end_of_turn_ids(const Tokenizer& tokenizer) {
  // The markers of the chat formats lockstep's families use (ChatML, Llama 3, Gemma, Phi,
  // DeepSeek, gpt-oss). Only those the template actually writes count.
  static const char* const kMarkers[] = {
      "<|im_end|>",   "<|eot_id|>", "<|eom_id|>",  "<end_of_turn>", "<turn|>",
      "<|end|>",      "<|return|>", "<|endoftext|>", "</s>",
      "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
  };
  const std::string& tmpl = tokenizer.chat_template();
  std::vector<int32_t> ids;
  if (tmpl.empty()) return ids;
  for (const char* m : kMarkers) {
    if (tmpl.find(m) == std::string::npos) continue;
    const auto id = tokenizer.token_id(m);
    if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  }
  return ids;
}

std::shared_ptr<const constraints::TokenVocabulary> token_vocabulary(
    const Tokenizer& tokenizer, std::span<const int32_t> eos_ids, int64_t model_vocab) {
  if (model_vocab <= 0) fail("constraint vocabulary: the model has ", model_vocab, " token ids");
  const int32_t n = static_cast<int32_t>(std::min<int64_t>(model_vocab, INT32_MAX));
  std::vector<std::string> bytes(static_cast<size_t>(n));
  const int32_t known = std::min(n, tokenizer.vocab_size());
  for (int32_t id = 0; id < known; ++id) bytes[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
  std::vector<int32_t> eos;
  for (const int32_t id : eos_ids)
    if (id >= 0 && id < n && std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  return std::make_shared<const constraints::TokenVocabulary>(std::move(bytes), std::move(eos));
}

}  // namespace lockstep
