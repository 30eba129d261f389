// Fuzzes the tokenizer.json loader: any input must either load or raise lockstep::Error; a
// loaded tokenizer must then encode and decode without crashing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<lockstep::Tokenizer> tok;
  try {
    tok = lockstep::Tokenizer::from_json(json);
  } catch (const lockstep::Error&) {
    return 0;
  }
  for (const char* text : {"hello world", "<|im_start|>x\n 12 caf\xC3\xA9", "\xFF\xE4\xBD", ""}) {
    const auto ids = tok->encode(text, true);
    (void)tok->decode(ids);
  }
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < tok->vocab_size() && id < 300; ++id) ids.push_back(id);
  (void)tok->decode(ids, true);
  return 0;
}
