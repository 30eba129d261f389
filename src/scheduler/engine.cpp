#include "scheduler/engine.h"

#include <algorithm>

#include "core/error.h"
#include "decode/speculative/drafters.h"
#include "scheduler/scheduler.h"
#include "scheduler/step_profile.h"

namespace lockstep {

Engine::Engine(Model& model, EngineOptions options, Model* draft, Gemma4Assistant* assistant)
    : model_(model), draft_(draft), assistant_(assistant), options_(options),
      queue_(static_cast<size_t>(std::max(options.parallel, 0)) + options.max_queue) {
  if (options_.parallel < 1) fail("--parallel must be >= 1, got ", options_.parallel);
  if (options_.prefill_chunk < 1) fail("--prefill-chunk must be >= 1, got ", options_.prefill_chunk);
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  stop_ = true;
  queue_.stop_accepting();
  if (thread_.joinable()) thread_.join();
}

int64_t Engine::context_tokens() const {
  const KvPool& pool = model_.kv_pool();
  const int64_t capacity = pool.total_blocks() * pool.block_tokens();
  const int64_t max_pos = model_.config().max_position_embeddings;
  return max_pos > 0 ? std::min(capacity, max_pos) : capacity;
}

void Engine::validate(EngineRequest& r) const {
  if (r.prompt.empty()) fail("prompt: empty (at least one token is needed)");
  const int64_t V = model_.config().vocab_size;
  for (int32_t id : r.prompt)
    if (id < 0 || id >= V) fail("prompt: token id ", id, " is outside the vocabulary [0, ", V, ")");
  if (r.options.max_tokens < 1) fail("max_tokens: must be >= 1, got ", r.options.max_tokens);
  r.options.sampling.validate();
  if (!is_spec_mode(r.spec))
    fail("spec: unknown mode \"", r.spec, "\" (expected none, lookup, draft, mtp or assistant)");
  if (r.spec == "draft" && !draft_) fail("spec: \"draft\" needs the server started with --draft-model");
  if (r.spec == "assistant" && !assistant_)
    fail("spec: \"assistant\" needs the server started with --draft-model of a Gemma 4 assistant");
  if (r.spec == "mtp" && !model_.mtp()) fail("spec: \"mtp\": the model has no MTP head");
  if (r.top_logprobs > 20) fail("top_logprobs: at most 20, got ", r.top_logprobs);
  const int64_t ctx = context_tokens();
  const auto plen = static_cast<int64_t>(r.prompt.size());
  if (output_room(plen, ctx) < 1)
    fail("prompt: ", plen, " tokens leave no room for output in the context of ", ctx, " tokens");
  if (r.options.max_tokens > output_room(plen, ctx))
    fail("max_tokens: prompt of ", plen, " tokens plus max_tokens ", r.options.max_tokens,
         " exceeds the context of ", ctx, " tokens (at most ", output_room(plen, ctx), " here)");
  r.options.drafter = nullptr;
  r.options.prefill_chunk = options_.prefill_chunk;
}

std::shared_ptr<RequestStream> Engine::submit(EngineRequest r) {
  std::vector<EngineRequest> one;
  one.push_back(std::move(r));
  return submit_all(std::move(one)).front();
}

std::vector<std::shared_ptr<RequestStream>> Engine::submit_all(std::vector<EngineRequest> requests) {
  for (auto& r : requests) validate(r);
  return queue_.push(std::move(requests));
}

void Engine::drain() {
  queue_.stop_accepting();
  draining_ = true;
  if (thread_.joinable()) thread_.join();
}

void Engine::loop() {
  Scheduler scheduler(model_, draft_, assistant_, options_, queue_);
  StepProfile profile(queue_);
  // Readers are scheduled off this thread (stream_waker.h); it outlives every emit below.
  StreamWaker waker;
  queue_.set_waker(&waker);
  for (;;) {
    waker.flush();  // events of a turn that ran no step (admission errors), before pop() waits
    if (stop_) break;
    profile.start_step();
    // Admission, first come first served: a request that does not fit blocks those behind it.
    while (scheduler.open_slots() > 0) {
      if (!scheduler.has_waiting()) {
        auto got = queue_.pop(scheduler.open_slots(), scheduler.idle(),
                              std::chrono::milliseconds(50));
        if (got.empty()) break;
        for (auto& g : got) scheduler.enqueue(std::move(g));
      }
      if (!scheduler.admit_front()) break;
    }
    scheduler.publish_gauges();
    if (scheduler.idle()) {
      if (draining_ && !scheduler.has_waiting() && queue_.empty()) break;
      continue;
    }

    // One step: blocks for every running sequence's next item (preempting when the pool runs
    // out), then one forward over all the items.
    profile.phase(StepPhase::Build);
    const std::vector<ForwardItem> items = scheduler.build_step();
    if (!items.empty()) {
      try {
        profile.phase(StepPhase::Forward);
        const ForwardResult out = model_.forward(items);
        profile.phase(StepPhase::Consume);
        scheduler.consume(out);
        waker.flush();  // the step's tokens: their readers run beside what follows
      } catch (const std::exception& ex) {
        scheduler.fail_step(ex.what());
      }
      queue_.update([&](EngineMetrics& m) {
        ++m.forward_calls;
        for (const auto& it : items) m.batch_rows_total += it.tokens.size();
      });
    }

    // Retire finished and cancelled sequences; their memory returns to the pool (or the cache).
    profile.phase(StepPhase::Retire);
    scheduler.retire();
    waker.flush();  // finishes (and the tokens of a step that failed)
    scheduler.publish_gauges();
    profile.end_step(items);
  }
  // Stopped: whatever is left is cancelled.
  scheduler.cancel_all();
  for (auto& p : queue_.pop(SIZE_MAX, false, std::chrono::milliseconds(0))) {
    StreamEvent e;
    e.kind = StreamEvent::Kind::Finish;
    e.finish_reason = "cancelled";
    queue_.emit(*p.stream, std::move(e));
  }
  queue_.set_waker(nullptr);  // the waker runs what it holds as it goes
}

}  // namespace lockstep
