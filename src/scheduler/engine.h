// The serving engine: iteration-level continuous batching over one model. HTTP threads submit
// requests and read their events from a RequestStream; one engine thread runs the scheduler loop
// (admit by the KV blocks a request needs now, grow running sequences' blocks and preempt when
// the pool runs out, build a batch of prefill chunks and decode/verify blocks, one forward, hand
// the rows to each sequence's SequenceDecoder; scheduler.h). Every request therefore runs the same
// decode logic as `lockstep generate`, and its tokens cannot depend on what else is in the batch.
//
// All locking between HTTP threads and the engine lives in request_queue.{h,cpp}.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "decode/generate.h"
#include "models/gemma4_assistant.h"
#include "scheduler/request_queue.h"

namespace lockstep {

struct EngineOptions {
  int parallel = 8;              // sequences decoding at once
  int64_t prefill_chunk = 256;   // prompt tokens per sequence per step (chunked prefill)
  int64_t max_step_tokens = 512; // tokens in one forward, over all sequences
  size_t max_queue = 64;         // requests waiting beyond `parallel`; more are refused (HTTP 503)
  bool prefix_cache = true;      // reuse KV of earlier requests' common prompt prefixes
  // Models with recurrent state cache whole states (snapshots), at most this many; 0 turns the
  // cache off. Attention-only models cache full KV blocks, bounded by the pool (scheduler.h).
  size_t prefix_cache_entries = 32;
  // KV blocks kept free when admitting a request beside running ones, for their growth; -1: one
  // per running sequence (each can then open its next block before anyone is preempted).
  int64_t kv_reserve_blocks = -1;
  // Speculation decided per step: a step in which more sequences decode than this runs them
  // without drafts (their last token alone), since a verify block costs each sequence 1 + k rows
  // and a full batch pays for them in compute. 0: drafts at any batch size. Tokens do not change
  // either way (speculation never changes them).
  int spec_max_batch = 0;
};

// The context rule, stated once: a request fits when its prompt and max_tokens together are at most
// the context. The decoder never runs a token past max_tokens (drafts are cut to the room left), so
// the last KV position a request writes is prompt + max_tokens - 2, with or without speculation.
inline int64_t output_room(int64_t prompt_tokens, int64_t context_tokens) {
  return context_tokens - prompt_tokens;  // the largest max_tokens this prompt allows
}

class Engine {
 public:
  // `draft` (optional) serves requests with spec "draft", `assistant` (optional, a Gemma 4
  // assistant loaded for `model`) those with spec "assistant".
  Engine(Model& model, EngineOptions options, Model* draft = nullptr,
         Gemma4Assistant* assistant = nullptr);
  ~Engine();  // stops the engine thread (cancelling what is left)
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and enqueues; throws QueueFull when `capacity()` requests are already held,
  // lockstep::Error (naming the field) for a request that can never run (prompt over the
  // context, unknown spec mode, ...).
  std::shared_ptr<RequestStream> submit(EngineRequest request);
  // The same for several requests (the n choices of one HTTP request): all are queued or none.
  std::vector<std::shared_ptr<RequestStream>> submit_all(std::vector<EngineRequest> requests);

  // Longest prompt + max_tokens of one request: the KV capacity, or the model's
  // max_position_embeddings when smaller.
  int64_t context_tokens() const;
  // Requests held at once, running or waiting: parallel + max_queue.
  size_t capacity() const { return static_cast<size_t>(options_.parallel) + options_.max_queue; }

  // Stops admitting new requests (submit throws ShuttingDown), finishes everything admitted or
  // queued, then returns.
  void drain();

  EngineMetrics metrics() const { return queue_.metrics(); }
  const Model& model() const { return model_; }
  const EngineOptions& options() const { return options_; }

 private:
  void loop();
  // Throws lockstep::Error naming the field when `r` can never run; fills engine-side options.
  void validate(EngineRequest& r) const;

  Model& model_;
  Model* draft_;
  Gemma4Assistant* assistant_;
  EngineOptions options_;
  RequestQueue queue_;
  std::atomic<bool> stop_{false}, draining_{false};
  std::thread thread_;
};

}  // namespace lockstep
