// /metrics text read back into numbers, and two scrapes differenced into the engine's per-step
// breakdown; the prompt pool and URL parsing the benchmark depends on.
#include <gtest/gtest.h>

#include "client/prometheus_text.h"
#include "client/serve_bench.h"
#include "client/step_breakdown.h"

namespace lockstep::client {
namespace {

const char* kScrape =
    "# HELP lockstep_steps_total Engine loop turns.\n"
    "# TYPE lockstep_steps_total counter\n"
    "lockstep_steps_total 10\n"
    "lockstep_batch_rows_total 40\n"
    "lockstep_step_sequences_total 20\n"
    "lockstep_step_seconds_total{phase=\"retire\"} 0.01\n"
    "lockstep_step_seconds_total{phase=\"admit\"} 0.02\n"
    "lockstep_step_seconds_total{phase=\"forward\"} 1.5\n"
    "lockstep_http_responses_total{class=\"2xx\"} 3\n"
    "lockstep_label_with_space{x=\"a b\"} 2.5e-3\n"
    "lockstep_engine_idle_seconds_total 4\n"
    "not_a_sample\n";

TEST(PrometheusText, SamplesKeyedAsWritten) {
  const auto m = parse_prometheus_text(kScrape);
  EXPECT_DOUBLE_EQ(m.at("lockstep_steps_total"), 10);
  EXPECT_DOUBLE_EQ(m.at("lockstep_step_seconds_total{phase=\"forward\"}"), 1.5);
  EXPECT_DOUBLE_EQ(m.at("lockstep_http_responses_total{class=\"2xx\"}"), 3);
  EXPECT_DOUBLE_EQ(m.at("lockstep_label_with_space{x=\"a b\"}"), 2.5e-3);
  EXPECT_EQ(m.count("not_a_sample"), 0u);
  EXPECT_EQ(m.count("# HELP lockstep_steps_total Engine loop turns."), 0u);
}

TEST(StepBreakdown, DifferenceOfTwoScrapesInLoopOrder) {
  const auto after = parse_prometheus_text(kScrape);
  MetricSamples before = after;
  before["lockstep_steps_total"] = 6;
  before["lockstep_step_seconds_total{phase=\"forward\"}"] = 1.1;
  before.erase("lockstep_batch_rows_total");  // absent before: counts from 0
  const auto b = step_breakdown(before, after);
  ASSERT_TRUE(b);
  EXPECT_DOUBLE_EQ(b->steps, 4);
  EXPECT_DOUBLE_EQ(b->rows, 40);
  ASSERT_EQ(b->phase_seconds.size(), 3u);
  EXPECT_EQ(b->phase_seconds[0].first, "admit");
  EXPECT_EQ(b->phase_seconds[1].first, "forward");
  EXPECT_EQ(b->phase_seconds[2].first, "retire");
  EXPECT_NEAR(b->ms_per_step(b->phase_seconds[1].second), 100, 1e-9);
  EXPECT_DOUBLE_EQ(b->busy_seconds(), 0.4);
  EXPECT_FALSE(step_breakdown({}, {{"vllm:num_requests_running", 1}})) << "no lockstep profile";
}

TEST(PoolPrompt, AFunctionOfSeedAndIndexInsideTheVocabulary) {
  const auto a = pool_prompt(7, 3, 64, 100);
  EXPECT_EQ(a, pool_prompt(7, 3, 64, 100));
  EXPECT_NE(a, pool_prompt(7, 4, 64, 100));
  EXPECT_NE(a, pool_prompt(8, 3, 64, 100));
  EXPECT_EQ(a.size(), 64u);
  for (int32_t id : a) EXPECT_TRUE(id >= 0 && id < 100);
}

TEST(ParseUrl, HostPortAndBasePath) {
  const Url u = parse_url("http://127.0.0.1:8080", "--url");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, "8080");
  EXPECT_EQ(u.base_path, "");
  const Url v = parse_url("http://gpu-box/serving/", "--url");
  EXPECT_EQ(v.port, "80");
  EXPECT_EQ(v.base_path, "/serving");
  EXPECT_EQ(parse_url("http://[::1]:9000", "--url").host, "::1");
  EXPECT_THROW(parse_url("https://x", "--url"), Error);
  EXPECT_THROW(parse_url("127.0.0.1:8080", "--url"), Error);
  EXPECT_THROW(parse_url("http://h:99999", "--url"), Error);
  try {
    parse_url("localhost", "--url");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--url"), std::string::npos) << "the error names the flag";
  }
}

}  // namespace
}  // namespace lockstep::client
