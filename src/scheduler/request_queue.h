// The one place where HTTP threads and the engine thread meet: the bounded queue of submitted
// requests, each request's event stream, cancellation flags and the metrics counters. Every
// mutex of the server lives here.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "decode/generate.h"
#include "scheduler/step_profile.h"
#include "scheduler/stream_waker.h"

namespace lockstep {

struct EngineRequest {
  std::vector<int32_t> prompt;
  GenerateOptions options;  // sampling, max_tokens, eos_ids, stop + tokenizer; drafter unused
  std::string spec = "none";  // none | lookup | draft | mtp
  int draft_width = 0;        // 0: the mode's default
  int top_logprobs = -1;      // -1: no logprobs; 0..20: chosen token's logprob + N alternatives
};

struct StreamEvent {
  enum class Kind { Token, Finish } kind = Kind::Token;
  int32_t token = -1;
  std::optional<TokenLogprob> logprob;  // when requested
  // Finish only:
  std::string finish_reason;            // stop | length | cancelled | error
  std::string error;                    // for finish_reason "error"
  size_t text_limit = std::string::npos;  // text length before a matched stop string
  int64_t cached_tokens = 0;            // prompt tokens whose KV came from the prefix cache
  GenerateStats stats;
  SpecStats spec;
};

class QueueFull : public std::runtime_error {
 public:
  QueueFull() : std::runtime_error("the request queue is full") {}
};
class ShuttingDown : public std::runtime_error {
 public:
  ShuttingDown() : std::runtime_error("the server is shutting down") {}
};

// What an HTTP thread holds for one request.
class RequestStream {
 public:
  // Waits up to `timeout` for the next event; false on timeout.
  bool next(StreamEvent& event, std::chrono::milliseconds timeout);
  // For asynchronous readers (the HTTP server, which keeps no thread per request): `wake` is
  // called after every event (on the engine's StreamWaker thread, or on the emitting thread when
  // the queue has no waker), and at once when events are already waiting. It must only schedule
  // work (post to an executor), never read the stream itself.
  void on_event(std::function<void()> wake);
  // The client is gone: the engine drops the sequence and frees its memory at its next step.
  void cancel();
  bool cancelled() const;

 private:
  friend class RequestQueue;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  std::function<void()> wake_;
  bool cancelled_ = false;
  bool finished_ = false;  // its Finish event was emitted (the queue no longer holds it)
};

struct EngineMetrics {
  uint64_t requests_total = 0, requests_finished = 0, requests_cancelled = 0, requests_rejected = 0;
  uint64_t prompt_tokens = 0, generated_tokens = 0, forward_calls = 0, batch_rows_total = 0;
  uint64_t drafted = 0, accepted = 0, prefix_cache_hits = 0, prefix_tokens_reused = 0;
  uint64_t preemptions = 0;  // running sequences whose KV was freed to let others grow
  // Steps run without drafts because more sequences decoded than EngineOptions::spec_max_batch.
  uint64_t spec_paused_steps = 0;
  // Requests not running yet: waiting in the queue, or taken by the engine and waiting for KV
  // memory. The engine writes the second part, metrics() adds the first.
  size_t queue_depth = 0, running = 0;
  // Blocks: in the pool, held by anyone (a shared block once), held by the prefix cache (some
  // shared with running sequences).
  int64_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_cached = 0, kv_block_tokens = 0;
  StepTotals steps;  // the engine loop's time by phase (step_profile.h)
  // Seconds the engine thread spent blocked in pop() waiting for a request, nothing running.
  double idle_seconds = 0;
};

// Bounded by the requests it holds from push to their Finish event (running or waiting), not by
// those not yet taken: how often the engine takes them (between forwards) then cannot make a
// request that fits get refused.
class RequestQueue {
 public:
  explicit RequestQueue(size_t capacity) : capacity_(capacity) {}

  // HTTP side. All of `requests` are queued, or none (QueueFull / ShuttingDown).
  std::vector<std::shared_ptr<RequestStream>> push(std::vector<EngineRequest> requests);
  EngineMetrics metrics() const;

  // Engine side.
  struct Pending {
    EngineRequest request;
    std::shared_ptr<RequestStream> stream;
  };
  // Takes up to `max` waiting requests; waits up to `timeout` when `wait` and none are waiting.
  std::vector<Pending> pop(size_t max, bool wait, std::chrono::milliseconds timeout);
  // Total time pop() spent waiting (EngineMetrics::idle_seconds).
  double waited_seconds() const;
  // A Finish event ends the request: the queue stops counting it against its capacity. The
  // stream's wake runs through the waker when one is set (at its next flush), else here.
  void emit(RequestStream& stream, StreamEvent event);
  // Engine thread, like emit: the waker that runs emitted events' wakes (null: none, inline).
  void set_waker(StreamWaker* waker) { waker_ = waker; }
  void stop_accepting();
  bool accepting() const;
  bool empty() const;
  // Engine-side counters and gauges (the engine thread is their only writer).
  void update(const std::function<void(EngineMetrics&)>& f);

 private:
  size_t capacity_;
  size_t held_ = 0;  // pushed, Finish not yet emitted
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> waiting_;
  bool accepting_ = true;
  double waited_seconds_ = 0;
  EngineMetrics metrics_;
  StreamWaker* waker_ = nullptr;  // engine thread only
};

}  // namespace lockstep
