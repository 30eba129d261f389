// What `lockstep bench-serve` prints: one JSON object (--json) or a human-readable table, and
// whether the run passed (no failed request, every identity check identical).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "client/serve_bench.h"

namespace lockstep::client {

struct ServeBenchRun {
  ServeBenchOptions options;
  ServerInfo server;
  std::vector<LevelResult> levels;
  std::optional<IdentityResult> identity;  // absent with --check-identity 0
};

bool run_passed(const ServeBenchRun& run);
nlohmann::ordered_json report_json(const ServeBenchRun& run);
std::string report_table(const ServeBenchRun& run);

}  // namespace lockstep::client
