// Percentiles interpolate between closest ranks as numpy does; inter-token latencies spread a
// multi-token chunk's gap over its tokens.
#include <gtest/gtest.h>

#include "client/latency_stats.h"

namespace lockstep::client {
namespace {

TEST(Percentile, InterpolatesBetweenClosestRanksLikeNumpy) {
  // numpy.percentile([1, 2, 3, 4], [0, 50, 90, 99, 100]) = 1, 2.5, 3.7, 3.97, 4
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_NEAR(percentile(v, 90), 3.7, 1e-12);
  EXPECT_NEAR(percentile(v, 99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
}

TEST(Percentile, DistributionOfASample) {
  std::vector<double> v;
  for (int i = 1; i <= 101; ++i) v.push_back(i);
  const Distribution d = distribution(v);
  EXPECT_EQ(d.count, 101u);
  EXPECT_DOUBLE_EQ(d.mean, 51);
  EXPECT_DOUBLE_EQ(d.p50, 51);
  EXPECT_DOUBLE_EQ(d.p90, 91);
  EXPECT_DOUBLE_EQ(d.p99, 100);
  EXPECT_DOUBLE_EQ(d.max, 101);
  EXPECT_EQ(distribution({}).count, 0u);
}

TEST(InterTokenLatencies, OneTokenPerChunkGivesTheGaps) {
  const std::vector<TokenArrival> chunks = {{0.5, 1}, {0.6, 1}, {0.8, 1}};
  const auto itl = inter_token_latencies(chunks);
  ASSERT_EQ(itl.size(), 2u);
  EXPECT_NEAR(itl[0], 0.1, 1e-12);
  EXPECT_NEAR(itl[1], 0.2, 1e-12);
}

TEST(InterTokenLatencies, AChunkOfKTokensSpreadsItsGapOverThem) {
  // First chunk (the TTFT) with 2 tokens: no gap for its second. Then 3 tokens after 0.3 s.
  const std::vector<TokenArrival> chunks = {{1.0, 2}, {1.3, 3}, {1.4, 1}};
  const auto itl = inter_token_latencies(chunks);
  ASSERT_EQ(itl.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(itl[i], 0.1, 1e-12);
  EXPECT_NEAR(itl[3], 0.1, 1e-12);
  double sum = 0;
  for (double g : itl) sum += g;
  EXPECT_NEAR(sum, 0.4, 1e-12) << "the latencies add up to first chunk -> last chunk";
}

}  // namespace
}  // namespace lockstep::client
