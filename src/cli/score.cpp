// lockstep score: per-position top logits and log-probabilities of a token sequence.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "cli/command.h"
#include "cli/common.h"
#include "core/error.h"
#include "decode/prefill.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {
namespace {

struct ScoreFlags {
  ModelFlags model;
  std::string ids, prompt;
  int top = 5;
  bool json = false, logits_hash = false;
};

// FNV-1a (64-bit) over the bytes of a row of float logits, as 16 hex digits: equal strings mean
// bitwise equal rows, which is how runs on different machines (x86 and Arm, scripts/
// test-arm64.sh) are compared without shipping whole logit tables.
std::string fnv1a_hex(const float* row, int64_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &row[i], sizeof bits);
    for (int b = 0; b < 4; ++b) h = (h ^ ((bits >> (8 * b)) & 0xffu)) * 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

int run_score(const ScoreFlags& f) {
  if (f.prompt.empty() == f.ids.empty()) fail("give exactly one of --ids 1,2,3 or -p TEXT");
  const std::string dir = resolve_model_dir(f.model);
  std::vector<int32_t> ids;
  if (!f.ids.empty()) {
    ids = parse_id_list(f.ids, "--ids");
  } else {
    auto tokenizer = load_tokenizer_if_present(dir);
    if (!tokenizer) fail(dir, " has no tokenizer.json: use --ids instead of -p");
    ids = tokenizer->encode(f.prompt, true);
  }
  if (ids.empty()) fail("nothing to score");
  ModelFlags mf = f.model;
  mf.dir = dir;
  auto model = load_model_from_flags(mf, static_cast<int64_t>(ids.size()));
  auto seq = model->new_sequence();
  const ForwardResult out = prefill(*model, *seq, ids, 0, PrefillRows::FinalChunk);
  const int64_t V = model->config().vocab_size, n = static_cast<int64_t>(ids.size());
  const int top = std::clamp<int>(f.top, 0, static_cast<int>(V));

  nlohmann::json positions = nlohmann::json::array();
  double nll = 0;
  std::vector<int32_t> order(V);
  for (int64_t p = 0; p < n; ++p) {
    const float* row = &out.logits[p * V];
    double mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < V; ++i) mx = std::max(mx, double(row[i]));
    for (int64_t i = 0; i < V; ++i) sum += std::exp(double(row[i]) - mx);
    const double log_z = mx + std::log(sum);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int32_t a, int32_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    nlohmann::json pos;
    pos["top_ids"] = std::vector<int32_t>(order.begin(), order.begin() + top);
    std::vector<float> tl;
    for (int i = 0; i < top; ++i) tl.push_back(row[order[i]]);
    pos["top_logits"] = tl;
    if (f.logits_hash) pos["logits_fnv1a"] = fnv1a_hex(row, V);
    if (p + 1 < n) {
      const double lp = double(row[ids[p + 1]]) - log_z;
      pos["next_logprob"] = lp;
      nll -= lp;
    } else {
      pos["next_logprob"] = nullptr;
    }
    positions.push_back(pos);
  }
  const double ppl = n > 1 ? std::exp(nll / double(n - 1)) : NAN;
  if (f.json) {
    nlohmann::json j;
    j["ids"] = ids;
    j["positions"] = positions;
    j["perplexity"] = n > 1 ? nlohmann::json(ppl) : nlohmann::json(nullptr);
    std::cout << j.dump() << "\n";
  } else {
    std::printf("%5s %8s %s%12s  %s\n", "pos", "id", f.logits_hash ? "logits_fnv1a     " : "",
                "next_logprob", "top ids (logit)");
    for (int64_t p = 0; p < n; ++p) {
      const auto& pos = positions[p];
      std::printf("%5lld %8d ", static_cast<long long>(p), ids[p]);
      if (f.logits_hash) std::printf("%s ", pos["logits_fnv1a"].get<std::string>().c_str());
      if (pos["next_logprob"].is_null())
        std::printf("%12s  ", "-");
      else
        std::printf("%12.5f  ", pos["next_logprob"].get<double>());
      for (int i = 0; i < top; ++i)
        std::printf("%d (%.3f) ", pos["top_ids"][i].get<int>(), pos["top_logits"][i].get<float>());
      std::printf("\n");
    }
    if (n > 1) std::printf("perplexity %.6f over %lld predicted tokens\n", ppl, (long long)(n - 1));
  }
  return 0;
}

const Command kScore("score", "Score a token sequence: top logits and log-probabilities per position",
                     [](CLI::App& app) {
                       auto f = std::make_shared<ScoreFlags>();
                       add_model_flags(app, f->model, false);
                       app.add_option("--ids", f->ids, "Token ids: 1,2,3");
                       app.add_option("-p,--prompt", f->prompt, "Text (encoded with the tokenizer)");
                       app.add_option("--top", f->top, "Top logits to report per position (default 5)")
                           ->check(CLI::NonNegativeNumber);
                       app.add_flag("--logits-hash", f->logits_hash,
                                    "Also give each position's whole logit row as a hash (FNV-1a "
                                    "of its float bits): equal hashes, bitwise equal logits");
                       app.add_flag("--json", f->json, "Print JSON");
                       return [f] { return run_score(*f); };
                     });

}  // namespace
}  // namespace lockstep::cli
