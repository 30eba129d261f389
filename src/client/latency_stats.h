// The arithmetic of a serving benchmark's latencies: percentiles (interpolated between closest
// ranks, as numpy's default and vLLM's benchmark compute them) and the inter-token latencies of
// one streamed response.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lockstep::client {

// The q-th percentile (q in [0, 100]) of `samples`, linearly interpolated between the two
// closest ranks; 0 for an empty sample.
double percentile(std::vector<double> samples, double q);

struct Distribution {
  size_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};
Distribution distribution(const std::vector<double>& samples);

// One streamed chunk that carried tokens: when it arrived (seconds since the request was sent)
// and how many tokens it holds (more than one when a speculative round or a slow reader gathered
// several).
struct TokenArrival {
  double seconds = 0;
  int64_t tokens = 0;
};

// Inter-token latencies of a response. A chunk of k tokens that arrived g seconds after the
// previous chunk gives k latencies of g / k (the gap spread evenly over its tokens), so the
// latencies sum to the time from the first chunk to the last and there is one per token after
// the first chunk's. Tokens that came with the first chunk have no measurable gap and give none.
std::vector<double> inter_token_latencies(std::span<const TokenArrival> chunks);

}  // namespace lockstep::client
