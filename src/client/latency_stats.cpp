#include "client/latency_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace lockstep::client {

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

Distribution distribution(const std::vector<double>& samples) {
  Distribution d;
  d.count = samples.size();
  if (samples.empty()) return d;
  d.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  d.p50 = percentile(samples, 50);
  d.p90 = percentile(samples, 90);
  d.p99 = percentile(samples, 99);
  d.max = *std::max_element(samples.begin(), samples.end());
  return d;
}

std::vector<double> inter_token_latencies(std::span<const TokenArrival> chunks) {
  std::vector<double> out;
  for (size_t i = 1; i < chunks.size(); ++i) {
    const int64_t k = chunks[i].tokens;
    if (k <= 0) continue;
    const double each = (chunks[i].seconds - chunks[i - 1].seconds) / static_cast<double>(k);
    out.insert(out.end(), static_cast<size_t>(k), each);
  }
  return out;
}

}  // namespace lockstep::client
