#include "decode/generate.h"

#include "decode/sequence_decoder.h"

namespace lockstep {

GenerateResult generate(Model& model, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const std::function<bool(int32_t)>& on_token) {
  // A decoder with max_tokens 0 starts finished, so that case needs nothing here.
  SequenceDecoder decoder(model, {prompt.begin(), prompt.end()}, options, on_token);
  while (!decoder.finished()) {
    const ForwardItem item = decoder.next_item();
    decoder.consume(model.forward({&item, 1}), 0);
  }
  return decoder.result();
}

}  // namespace lockstep
