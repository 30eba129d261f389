#include "decode/speculative/drafters.h"

#include "core/error.h"
#include "decode/speculative/assistant_drafter.h"
#include "decode/speculative/draft_model_drafter.h"
#include "decode/speculative/lookup_drafter.h"
#include "decode/speculative/mtp_drafter.h"

namespace lockstep {

bool is_spec_mode(const std::string& m) {
  return m == "none" || m == "lookup" || m == "draft" || m == "mtp" || m == "assistant";
}

int default_draft_width(const std::string& mode) {
  if (mode == "lookup") return 8;
  if (mode == "draft") return 2;
  if (mode == "assistant") return 3;  // no published assistant measured yet: the gated widths' middle
  return 1;  // mtp
}

std::unique_ptr<Drafter> make_drafter(const std::string& mode, Model& target, Model* draft,
                                      const SamplingParams& sampling,
                                      Gemma4Assistant* assistant) {
  if (mode == "none") return nullptr;
  if (mode == "lookup") return std::make_unique<LookupDrafter>();
  if (mode == "mtp") return std::make_unique<MtpSpecDrafter>(target, sampling);
  if (mode == "assistant") {
    if (!assistant) fail("spec \"assistant\" needs a Gemma 4 assistant (--draft-model DIR)");
    return std::make_unique<AssistantDrafter>(*assistant, target, sampling);
  }
  if (mode == "draft") {
    if (!draft) fail("spec \"draft\" needs a draft model (--draft-model DIR)");
    return std::make_unique<DraftModelDrafter>(*draft, sampling);
  }
  fail("spec: unknown mode \"", mode, "\" (expected none, lookup, draft, mtp or assistant)");
}

}  // namespace lockstep
