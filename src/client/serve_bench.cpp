#include "client/serve_bench.h"

#include <algorithm>
#include <atomic>
#include <latch>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "client/prometheus_text.h"
#include "core/error.h"

namespace lockstep::client {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The server's counters now; empty when it serves no /metrics (another engine, or a failure).
MetricSamples scrape_metrics(const ServeBenchOptions& o) {
  try {
    HttpConnection c(o.url, o.api_key, o.timeout);
    const HttpReply r = c.get("/metrics");
    if (r.status == 200) return parse_prometheus_text(r.body);
  } catch (const ConnectionError&) {
  }
  return {};
}

// Per-request figures of a finished level: totals and latency distributions.
void summarize_level(LevelResult& L) {
  std::sort(L.records.begin(), L.records.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.index < b.index; });
  std::vector<double> ttft, itl, e2e;
  for (const RequestRecord& r : L.records) {
    if (!r.ok) {
      ++L.failed;
      if (L.first_error.empty()) L.first_error = r.error;
      continue;
    }
    ++L.succeeded;
    L.prompt_tokens += r.prompt_tokens;
    L.completion_tokens += r.completion_tokens;
    L.counted_per_chunk = L.counted_per_chunk && r.counted_per_chunk;
    ttft.push_back(r.ttft);
    e2e.push_back(r.e2e);
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
  }
  L.sent = static_cast<int64_t>(L.records.size());
  L.end_index = L.records.empty() ? L.first_index : L.records.back().index + 1;
  L.ttft = distribution(ttft);
  L.itl = distribution(itl);
  L.e2e = distribution(e2e);
}

}  // namespace

ServerInfo parse_models_reply(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("data") || !j["data"].is_array() ||
      j["data"].empty() || !j["data"][0].is_object())
    fail("GET /v1/models: expected {\"data\": [{\"id\": ...}, ...]}, got ", body.substr(0, 300));
  const json& m = j["data"][0];
  ServerInfo info;
  info.model = m.value("id", "");
  auto integer = [](const json& o, const char* key) {
    return o.is_object() && o.contains(key) && o[key].is_number_integer() ? o[key].get<int64_t>() : 0;
  };
  // llama-server keeps its figures under "meta"; n_ctx there is one slot's context, what one
  // request may use.
  const json meta = m.value("meta", json());
  info.max_model_len = integer(m, "max_model_len");
  if (info.max_model_len == 0) info.max_model_len = integer(m, "context_length");
  if (info.max_model_len == 0) info.max_model_len = integer(meta, "n_ctx");
  info.vocab_size = integer(m, "vocab_size");
  if (info.vocab_size == 0) info.vocab_size = integer(meta, "n_vocab");
  return info;
}

ServerInfo query_server(HttpConnection& connection) {
  const HttpReply r = connection.get("/v1/models");
  if (r.status != 200)
    fail("GET /v1/models answered HTTP ", r.status, ": ", r.body.substr(0, 300),
         r.status == 401 ? " (pass the server's key with --api-key)" : "");
  return parse_models_reply(r.body);
}

std::vector<int32_t> pool_prompt(uint64_t seed, int64_t index, int64_t length, int64_t vocab) {
  std::mt19937_64 rng(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(index))));
  std::vector<int32_t> ids(static_cast<size_t>(length));
  // Modulo keeps the ids the same on every standard library (uniform_int_distribution's are not);
  // its bias, under vocab / 2^64, does not matter here.
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return ids;
}

CompletionRequest pool_request(const ServeBenchOptions& o, int64_t index) {
  CompletionRequest r;
  r.model = o.model;
  r.prompt = pool_prompt(o.seed, index, o.input_len, o.vocab_size);
  r.max_tokens = o.output_len;
  r.temperature = o.temperature;
  r.seed = o.seed + static_cast<uint64_t>(index);
  return r;
}

LevelResult run_level(const ServeBenchOptions& o, int concurrency, int64_t first_index,
                      const std::function<void(const std::string&)>& progress) {
  LevelResult L;
  L.concurrency = concurrency;
  L.first_index = first_index;
  const bool timed = o.seconds > 0;
  const int64_t total = o.requests > 0 ? o.requests : std::max<int64_t>(4 * concurrency, 16);
  std::atomic<int64_t> next{0}, done{0}, failed{0};
  std::mutex mu;
  std::latch connected(concurrency), go(1);
  Clock::time_point start;
  auto worker = [&] {
    HttpConnection connection(o.url, o.api_key, o.timeout);
    try {
      connection.connect();  // before the clock starts; a failure shows in the first request
    } catch (const ConnectionError&) {
    }
    connected.count_down();
    go.wait();
    for (;;) {
      const int64_t i = next.fetch_add(1);
      if (timed ? since(start) >= o.seconds : i >= total) break;
      const CompletionRequest request = pool_request(o, first_index + i);
      const double sent = since(start);
      RequestRecord rec = run_completion(connection, o.path, request);
      rec.index = first_index + i;
      rec.start = sent;
      ++done;
      if (!rec.ok) ++failed;
      std::lock_guard<std::mutex> lock(mu);
      L.records.push_back(std::move(rec));
    }
  };

  const MetricSamples before = scrape_metrics(o);
  std::vector<std::thread> workers;
  for (int c = 0; c < concurrency; ++c) workers.emplace_back(worker);
  connected.wait();
  start = Clock::now();
  go.count_down();
  // Progress every 10 s while the workers run (each request lasts at least a round trip).
  std::atomic<bool> finished{false};
  std::thread reporter([&] {
    Clock::time_point last = Clock::now();
    while (!finished) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (since(last) < 10 || finished) continue;
      last = Clock::now();
      progress("concurrency " + std::to_string(concurrency) + ": " + std::to_string(done.load()) +
               (timed ? "" : " of " + std::to_string(total)) + " requests done (" +
               std::to_string(failed.load()) + " failed), " + std::to_string(static_cast<int>(since(start))) + " s");
    }
  });
  for (auto& w : workers) w.join();
  L.wall_seconds = since(start);
  finished = true;
  reporter.join();
  L.steps = step_breakdown(before, scrape_metrics(o));
  summarize_level(L);
  return L;
}

IdentityResult check_identity(const ServeBenchOptions& o, const LevelResult& level,
                              const std::function<void(const std::string&)>& progress) {
  IdentityResult result;
  result.concurrency = level.concurrency;
  std::vector<const RequestRecord*> ok;
  for (const RequestRecord& r : level.records)
    if (r.ok) ok.push_back(&r);
  const size_t k = std::min(ok.size(), static_cast<size_t>(std::max(o.identity_checks, 0)));
  if (k == 0) return result;
  progress("identity: rerunning " + std::to_string(k) + " requests of concurrency " +
           std::to_string(level.concurrency) + " one at a time");
  HttpConnection connection(o.url, o.api_key, o.timeout);
  for (size_t j = 0; j < k; ++j) {
    const RequestRecord& under_load = *ok[j * ok.size() / k];  // evenly spaced over the level
    const RequestRecord alone = run_completion(connection, o.path, pool_request(o, under_load.index));
    ++result.checked;
    std::string what;
    if (!alone.ok) {
      what = "the rerun failed: " + alone.error;
    } else if (alone.completion_tokens != under_load.completion_tokens) {
      what = std::to_string(alone.completion_tokens) + " tokens alone against " +
             std::to_string(under_load.completion_tokens) + " under load";
    } else if (alone.text != under_load.text) {
      const auto diff = std::mismatch(alone.text.begin(), alone.text.end(), under_load.text.begin(),
                                      under_load.text.end());
      what = "text differs from byte " + std::to_string(diff.first - alone.text.begin());
    }
    if (what.empty()) ++result.identical;
    else result.mismatches.push_back({under_load.index, what});
  }
  return result;
}

}  // namespace lockstep::client
