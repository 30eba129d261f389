#include "decode/batch_generate.h"

#include <memory>

#include "decode/sequence_decoder.h"

namespace lockstep {

std::vector<GenerateResult> generate_batch(Model& model,
                                           std::span<const std::vector<int32_t>> prompts,
                                           const GenerateOptions& options) {
  std::vector<std::unique_ptr<SequenceDecoder>> decoders;
  for (const auto& p : prompts) decoders.push_back(std::make_unique<SequenceDecoder>(model, p, options));
  for (;;) {
    std::vector<ForwardItem> items;
    std::vector<SequenceDecoder*> owners;
    for (auto& d : decoders)
      if (!d->finished()) {
        items.push_back(d->next_item());
        owners.push_back(d.get());
      }
    if (items.empty()) break;
    const ForwardResult out = model.forward(items);
    for (size_t i = 0; i < owners.size(); ++i) owners[i]->consume(out, i);
  }
  std::vector<GenerateResult> results;
  for (auto& d : decoders) results.push_back(d->result());
  return results;
}

}  // namespace lockstep
