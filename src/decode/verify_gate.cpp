#include "decode/verify_gate.h"

#include <chrono>
#include <memory>

#include "decode/batch_generate.h"
#include "decode/constraint_tracker.h"
#include "decode/speculative/assistant_drafter.h"
#include "decode/speculative/draft_model_drafter.h"
#include "decode/speculative/lookup_drafter.h"
#include "decode/speculative/mtp_drafter.h"

namespace lockstep {

size_t GateReport::identical() const {
  size_t n = 0;
  for (const auto& c : cases) n += c.identical;
  return n;
}
size_t GateReport::diverged() const { return cases.size() - identical(); }

namespace {

void compare(const std::vector<int32_t>& want, const std::vector<int32_t>& got, GateCase& c) {
  c.tokens = static_cast<int64_t>(got.size());
  const size_t n = std::max(want.size(), got.size());
  for (size_t i = 0; i < n; ++i) {
    const int32_t a = i < want.size() ? want[i] : -1, b = i < got.size() ? got[i] : -1;
    if (a != b) {
      c.identical = false;
      c.first_diff = static_cast<int64_t>(i);
      c.expected = a;
      c.got = b;
      return;
    }
  }
}

}  // namespace

GateReport run_gate(Model& model, const GateConfig& cfg,
                    const std::function<void(const GateCase&)>& on_case) {
  GateReport report;
  auto record = [&](GateCase c) {
    if (on_case) on_case(c);
    report.cases.push_back(std::move(c));
  };
  for (float temp : cfg.temperatures) {
    GenerateOptions base;
    base.max_tokens = cfg.max_tokens;
    base.eos_ids = cfg.eos_ids;
    base.sampling.temperature = temp;
    base.sampling.seed = cfg.seed;
    base.constraint = cfg.constraint;
    base.reasoning_budget = cfg.reasoning_budget;

    std::vector<std::vector<int32_t>> baseline;
    for (const auto& p : cfg.prompts) {
      baseline.push_back(generate(model, p, base).tokens);
      if (cfg.constraint) {
        switch (check_constraint(*cfg.constraint, baseline.back())) {
          case ConstraintCheck::kComplete: ++report.constraint_complete; break;
          case ConstraintCheck::kIncomplete: ++report.constraint_incomplete; break;
          case ConstraintCheck::kInvalid: ++report.constraint_invalid; break;
        }
      }
    }

    // Every prompt together, one token of each per forward.
    auto t0 = std::chrono::steady_clock::now();
    const auto batched = generate_batch(model, cfg.prompts, base);
    const double batch_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t i = 0; i < cfg.prompts.size(); ++i) {
      GateCase c;
      c.mode = "batched";
      c.prompt = i;
      c.temperature = temp;
      c.seconds = batch_seconds / double(cfg.prompts.size());
      compare(baseline[i], batched[i].tokens, c);
      record(c);
    }

    struct Mode {
      std::string name;
      int width;
      std::function<std::unique_ptr<Drafter>()> make;
    };
    std::vector<Mode> modes;
    modes.push_back({"classic-chunked", 0, nullptr});
    for (int w : cfg.lookup_widths)
      modes.push_back({"lookup/w" + std::to_string(w), w,
                       [] { return std::make_unique<LookupDrafter>(); }});
    if (cfg.draft_model)
      for (int w : cfg.draft_widths)
        modes.push_back({"draft/w" + std::to_string(w), w, [&] {
                           return std::make_unique<DraftModelDrafter>(*cfg.draft_model,
                                                                      base.sampling);
                         }});
    if (model.mtp())
      for (int w : cfg.mtp_widths)
        modes.push_back({"mtp/w" + std::to_string(w), w, [&] {
                           return std::make_unique<MtpSpecDrafter>(model, base.sampling);
                         }});
    if (cfg.assistant)
      for (int w : cfg.assistant_widths)
        modes.push_back({"assistant/w" + std::to_string(w), w, [&] {
                           return std::make_unique<AssistantDrafter>(*cfg.assistant, model,
                                                                     base.sampling);
                         }});
    for (const Mode& m : modes) {
      for (size_t i = 0; i < cfg.prompts.size(); ++i) {
        GenerateOptions o = base;
        std::unique_ptr<Drafter> drafter;
        if (m.make) {
          drafter = m.make();
          o.drafter = drafter.get();
          o.draft_width = m.width;
        } else {
          o.prefill_chunk = cfg.prefill_chunk;
        }
        t0 = std::chrono::steady_clock::now();
        const GenerateResult r = generate(model, cfg.prompts[i], o);
        GateCase c;
        c.mode = m.name;
        c.prompt = i;
        c.temperature = temp;
        c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        c.spec = r.spec;
        compare(baseline[i], r.tokens, c);
        record(c);
      }
    }
  }
  return report;
}

}  // namespace lockstep
