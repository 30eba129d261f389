// Reading a Prometheus text exposition (what GET /metrics serves) back into numbers, so a load
// generator can difference two scrapes.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace lockstep::client {

// Every sample line "name{labels} value [timestamp]", keyed by the text before the value exactly
// as written (`lockstep_step_seconds_total{phase="forward"}`, `lockstep_steps_total`). Comments,
// blank lines and lines whose value is not a number are skipped.
std::map<std::string, double> parse_prometheus_text(std::string_view text);

}  // namespace lockstep::client
