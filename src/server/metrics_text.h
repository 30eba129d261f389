// GET /metrics: engine and HTTP counters in the Prometheus text exposition format (version
// 0.0.4): "# HELP", "# TYPE", then `lockstep_<name> <value>` lines.
#pragma once

#include <string>

#include "scheduler/request_queue.h"
#include "server/http_stats.h"

namespace lockstep::server {

std::string metrics_text(const EngineMetrics& m, const HttpStats& http);

}  // namespace lockstep::server
