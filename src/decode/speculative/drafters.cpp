#include "decode/speculative/drafters.h"

#include "core/error.h"
#include "decode/speculative/draft_model_drafter.h"
#include "decode/speculative/lookup_drafter.h"
#include "decode/speculative/mtp_drafter.h"

namespace lockstep {

bool is_spec_mode(const std::string& m) {
  return m == "none" || m == "lookup" || m == "draft" || m == "mtp";
}

int default_draft_width(const std::string& mode) {
  if (mode == "lookup") return 8;
  if (mode == "draft") return 2;
  return 1;  // mtp
}

std::unique_ptr<Drafter> make_drafter(const std::string& mode, Model& target, Model* draft,
                                      const SamplingParams& sampling) {
  if (mode == "none") return nullptr;
  if (mode == "lookup") return std::make_unique<LookupDrafter>();
  if (mode == "mtp") return std::make_unique<MtpSpecDrafter>(target, sampling);
  if (mode == "draft") {
    if (!draft) fail("spec \"draft\" needs a draft model (--draft-model DIR)");
    return std::make_unique<DraftModelDrafter>(*draft, sampling);
  }
  fail("spec: unknown mode \"", mode, "\" (expected none, lookup, draft or mtp)");
}

}  // namespace lockstep
