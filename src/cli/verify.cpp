// lockstep verify: the generation gate. Exit status 1 when any case differs (exact numerics).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/constraint_flags.h"
#include "cli/spec_flags.h"
#include "core/error.h"
#include "decode/verify_gate.h"
#include "kernels/numerics.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {
namespace {

struct VerifyFlags {
  ModelFlags model;
  SpecFlags spec;
  ConstraintFlags constraint;
  std::string prompts_file, draft_model;
  int64_t max_tokens = 128;
  bool json = false;
};

// JSON lines: "text", {"prompt": "text"} or {"ids": [1, 2, 3]}.
std::vector<std::vector<int32_t>> read_prompts(const std::string& path, const Tokenizer* tok) {
  std::ifstream in(path);
  if (!in) fail("--prompts: cannot open ", path);
  std::vector<std::vector<int32_t>> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      fail(path, ":", n, ": not JSON (expected \"text\", {\"prompt\": ...} or {\"ids\": [...]})");
    }
    if (j.is_object() && j.contains("ids")) {
      out.push_back(j["ids"].get<std::vector<int32_t>>());
    } else {
      const std::string text = j.is_string() ? j.get<std::string>() : j.value("prompt", "");
      if (text.empty()) fail(path, ":", n, ": empty prompt");
      if (!tok) fail(path, ":", n, ": text prompt, but the model has no tokenizer.json (use ids)");
      out.push_back(tok->encode(text, true));
    }
  }
  if (out.empty()) fail("--prompts: ", path, " holds no prompts");
  return out;
}

// Without --prompts: id prompts with repeated stretches (so lookup finds matches), built from
// a fixed pattern inside the vocabulary.
std::vector<std::vector<int32_t>> default_prompts(int64_t vocab) {
  std::vector<std::vector<int32_t>> out;
  for (int p = 0; p < 6; ++p) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 12 + 5 * p; ++i) ids.push_back(static_cast<int32_t>((i * 37 + p * 101 + 3) % vocab));
    for (int i = 0; i < 6; ++i) ids.push_back(ids[i]);  // a repeat
    out.push_back(ids);
  }
  return out;
}

int run_verify(const VerifyFlags& f) {
  apply_numerics(f.spec);
  const std::string dir = resolve_model_dir(f.model);
  auto tok = load_tokenizer_if_present(dir);
  ModelFlags mf = f.model;
  mf.dir = dir;
  auto model = load_model_from_flags(mf, 0);
  GateConfig cfg;
  cfg.prompts = f.prompts_file.empty() ? default_prompts(model->config().vocab_size)
                                       : read_prompts(f.prompts_file, tok.get());
  cfg.max_tokens = f.max_tokens;
  cfg.eos_ids = model->config().eos_token_ids;
  cfg.constraint = compile_constraint_flags(f.constraint, tok.get(), model->config(),
                                            eos_ids_for(model->config(), tok.get()),
                                            /*with_end_of_turn=*/true);
  std::unique_ptr<Model> draft;
  std::unique_ptr<Gemma4Assistant> assistant;
  const std::string draft_dir = f.draft_model.empty() ? default_draft_dir(dir) : f.draft_model;
  if (!draft_dir.empty() && is_gemma4_assistant_dir(draft_dir)) {
    // A Gemma 4 assistant gates assistant/wK (it reads the target's cache in every case).
    assistant = load_gemma4_assistant(draft_dir, *model);
    cfg.assistant = assistant.get();
  } else if (!draft_dir.empty()) {
    // On the target's device, as generate and serve run it (a CPU draft beside a GPU target would
    // gate a pairing no user runs).
    draft = load_draft_model(draft_dir, *model, ModelOptions{}.kv_capacity_tokens);
    cfg.draft_model = draft.get();
  }
  const bool exact = f.spec.numerics == "exact";
  std::fprintf(stderr, "verify: %zu prompts, %lld tokens, numerics %s, %s quant dot\n",
               cfg.prompts.size(), static_cast<long long>(cfg.max_tokens), f.spec.numerics.c_str(),
               kernels::quant_dot_name(kernels::quant_dot()));
  const GateReport report = run_gate(*model, cfg, [&](const GateCase& c) {
    if (!c.identical)
      std::fprintf(stderr, "  DIVERGED %-16s prompt %zu temp %.1f at %lld: expected %d got %d\n",
                   c.mode.c_str(), c.prompt, c.temperature, static_cast<long long>(c.first_diff),
                   c.expected, c.got);
  });
  // Per mode: identical/total, acceptance, tokens/s.
  struct Agg {
    size_t total = 0, same = 0;
    int64_t drafted = 0, accepted = 0, tokens = 0;
    double seconds = 0;
  };
  std::map<std::string, Agg> by_mode;
  for (const auto& c : report.cases) {
    Agg& a = by_mode[c.mode];
    ++a.total;
    a.same += c.identical;
    a.drafted += c.spec.drafted;
    a.accepted += c.spec.accepted;
    a.tokens += c.tokens;
    a.seconds += c.seconds;
  }
  if (f.json) {
    nlohmann::json j;
    j["numerics"] = f.spec.numerics;
    j["quant_dot"] = kernels::quant_dot_name(kernels::quant_dot());
    j["identical"] = report.identical();
    j["diverged"] = report.diverged();
    j["flips_per_100"] = 100.0 * double(report.diverged()) / double(report.cases.size());
    if (cfg.constraint)
      j["constraint"] = {{"complete", report.constraint_complete},
                         {"incomplete", report.constraint_incomplete},
                         {"invalid", report.constraint_invalid}};
    for (const auto& c : report.cases)
      j["cases"].push_back({{"mode", c.mode}, {"prompt", c.prompt}, {"temperature", c.temperature},
                            {"identical", c.identical}, {"first_diff", c.first_diff},
                            {"expected", c.expected}, {"got", c.got},
                            {"acceptance", c.spec.acceptance()}});
    std::cout << j.dump() << "\n";
  } else {
    std::printf("%-18s %10s %11s %9s\n", "mode", "identical", "acceptance", "tok/s");
    for (const auto& [mode, a] : by_mode)
      std::printf("%-18s %5zu/%-4zu %11.3f %9.1f\n", mode.c_str(), a.same, a.total,
                  a.drafted ? double(a.accepted) / a.drafted : 0.0,
                  a.seconds > 0 ? a.tokens / a.seconds : 0.0);
    if (cfg.constraint)
      std::printf("constraint: baselines %zu complete, %zu cut by -n, %zu invalid\n",
                  report.constraint_complete, report.constraint_incomplete,
                  report.constraint_invalid);
    std::printf("%s: %zu identical, %zu diverged (%.1f per 100)\n",
                report.diverged() ? "DIVERGED" : "PASS", report.identical(), report.diverged(),
                100.0 * double(report.diverged()) / double(report.cases.size()));
  }
  if (report.constraint_invalid)
    std::fprintf(stderr, "verify: %zu generations break their constraint\n",
                 report.constraint_invalid);
  return (exact && report.diverged()) || report.constraint_invalid ? 1 : 0;
}

const Command kVerify(
    "verify",
    "The generation gate: classic vs chunked, batched and every speculative mode and width, "
    "at temperature 0 and seeded 0.8; exits 1 on any difference",
    [](CLI::App& app) {
      auto f = std::make_shared<VerifyFlags>();
      add_model_flags(app, f->model, false);
      add_numerics_flag(app, f->spec);
      add_constraint_flags(app, f->constraint);
      app.add_option("--prompts", f->prompts_file,
                     "JSON lines: \"text\", {\"prompt\": \"text\"} or {\"ids\": [...]}");
      app.add_option("-n,--max-tokens", f->max_tokens, "Tokens per generation (default 128)")
          ->check(CLI::PositiveNumber);
      app.add_option("--draft-model", f->draft_model,
                     "Also gate draft-model speculation (default with the shipped target: the "
                     "shipped draft), or, for a gemma4_assistant directory, the assistant modes");
      app.add_flag("--json", f->json, "Print the report as JSON");
      return [f] { return run_verify(*f); };
    });

}  // namespace
}  // namespace lockstep::cli
