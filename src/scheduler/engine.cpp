#include "scheduler/engine.h"

#include <algorithm>
#include <deque>

#include "core/error.h"
#include "decode/sequence_decoder.h"
#include "decode/speculative/drafters.h"
#include "scheduler/prefix_cache.h"
#include "scheduler/step_profile.h"

namespace lockstep {

namespace {

using Clock = std::chrono::steady_clock;

struct Running {
  std::unique_ptr<Drafter> drafter;  // declared before the decoder, which points at it
  std::unique_ptr<SequenceDecoder> decoder;
  std::shared_ptr<RequestStream> stream;
  int64_t reserved_blocks = 0;
  int64_t forward_index = -1;  // its item in the current step's forward, or -1
  bool errored = false;        // its finish event (an error) has been sent
  bool prompt_cached = false;  // a fork of its state at the end of the prompt is in the cache
  int64_t cached_tokens = 0;   // prompt tokens reused from the prefix cache at admission
};

int64_t blocks_for(const KvPool& pool, int64_t tokens) {
  return (tokens + pool.block_tokens() - 1) / pool.block_tokens();
}

// Tokens drafted per round for this request (0 without speculation).
int draft_width_of(const EngineRequest& r) {
  if (r.spec == "none") return 0;
  return r.draft_width > 0 ? r.draft_width : default_draft_width(r.spec);
}

// The most tokens a request can ever hold in the cache (see output_room in engine.h).
int64_t worst_case_tokens(const EngineRequest& r) {
  return static_cast<int64_t>(r.prompt.size()) + r.options.max_tokens;
}

}  // namespace

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
  std::vector<Running> running;
  std::deque<RequestQueue::Pending> deferred;  // popped but waiting for KV memory
  PrefixCache cache(model_, options_.prefix_cache ? options_.prefix_cache_entries : 0);
  KvPool& pool = model_.kv_pool();
  int64_t reserved = 0;
  StepProfile profile(queue_);

  auto finish = [&](RequestStream& stream, const GenerateResult& r, const std::string& reason,
                    const std::string& error = "", int64_t cached_tokens = 0) {
    StreamEvent e;
    e.cached_tokens = cached_tokens;
    e.kind = StreamEvent::Kind::Finish;
    e.finish_reason = reason;
    e.error = error;
    e.text_limit = r.text_limit;
    e.stats = r.stats;
    e.spec = r.spec;
    queue_.emit(stream, std::move(e));
  };

  // Admits one request if its worst-case KV fits; false when it must wait.
  auto admit = [&](RequestQueue::Pending& p) {
    if (p.stream->cancelled()) {
      queue_.update([](EngineMetrics& m) { ++m.requests_cancelled; });
      finish(*p.stream, {}, "cancelled");
      return true;
    }
    const int64_t need = blocks_for(pool, worst_case_tokens(p.request));
    while (pool.total_blocks() - reserved - cache.blocks() < need && cache.evict_one()) {
    }
    if (pool.total_blocks() - reserved - cache.blocks() < need) return false;
    Running run;
    run.stream = p.stream;
    run.reserved_blocks = need;
    EngineRequest& r = p.request;
    try {
      run.drafter = make_drafter(r.spec, model_, draft_, r.options.sampling, assistant_);
      GenerateOptions o = r.options;
      o.drafter = run.drafter.get();
      o.draft_width = draft_width_of(r);
      o.top_logprobs = r.top_logprobs;
      std::unique_ptr<SequenceState> state;
      const bool hidden = run.drafter && run.drafter->needs_hidden();
      if (!hidden && cache.size() > 0) state = cache.lookup(r.prompt);
      if (state) {
        const int64_t reused = state->length;
        run.cached_tokens = reused;
        queue_.update([&](EngineMetrics& m) {
          ++m.prefix_cache_hits;
          m.prefix_tokens_reused += static_cast<uint64_t>(reused);
        });
      }
      RequestStream* stream = run.stream.get();
      // The callback outlives this scope; it finds its decoder (for logprobs) through `self`.
      auto self = std::make_shared<SequenceDecoder*>(nullptr);
      run.decoder = std::make_unique<SequenceDecoder>(
          model_, r.prompt, o,
          [this, stream, self](int32_t token) {
            StreamEvent e;
            e.token = token;
            const auto& lps = (*self)->result().logprobs;
            if (!lps.empty() && lps.back().token == token &&
                lps.size() == (*self)->result().tokens.size())
              e.logprob = lps.back();
            queue_.emit(*stream, std::move(e));
            return !stream->cancelled();
          },
          std::move(state));
      *self = run.decoder.get();
    } catch (const std::exception& ex) {
      finish(*p.stream, {}, "error", ex.what());
      return true;
    }
    queue_.update([&](EngineMetrics& m) { m.prompt_tokens += p.request.prompt.size(); });
    reserved += need;
    running.push_back(std::move(run));
    return true;
  };

  for (;;) {
    if (stop_) break;
    profile.start_step();
    // Admission, first come first served: a request that does not fit blocks those behind it.
    while (static_cast<int>(running.size()) < options_.parallel) {
      if (deferred.empty()) {
        auto got = queue_.pop(static_cast<size_t>(options_.parallel) - running.size(),
                              running.empty(), std::chrono::milliseconds(50));
        if (got.empty()) break;
        for (auto& g : got) deferred.push_back(std::move(g));
      }
      if (!admit(deferred.front())) {
        if (running.empty()) {  // cannot fit even alone: the context check makes this rare
          finish(*deferred.front().stream, {}, "error", "not enough KV cache memory for this request");
          deferred.pop_front();
          continue;
        }
        break;
      }
      deferred.pop_front();
    }
    // Taken from the queue but not admitted (waiting for KV memory) still counts as queued.
    queue_.update([&](EngineMetrics& m) {
      m.queue_depth = deferred.size();
      m.running = running.size();
    });
    if (running.empty()) {
      if (draining_ && deferred.empty() && queue_.empty()) break;
      continue;
    }

    // One step: every running sequence contributes one item (decode blocks first, then prefill
    // chunks within the token budget). Who shares the step never changes a sequence's bits.
    profile.phase(StepPhase::Build);
    std::vector<ForwardItem> items;
    int64_t budget = options_.max_step_tokens;
    for (auto& r : running) r.forward_index = -1;
    for (int pass = 0; pass < 2; ++pass) {
      for (auto& r : running) {
        if (r.decoder->finished() || r.stream->cancelled()) continue;
        if ((pass == 0) == r.decoder->prefilling()) continue;
        if (pass == 1 && budget <= 0) break;
        ForwardItem item = r.decoder->next_item(pass == 1 ? std::min(options_.prefill_chunk, budget) : 0);
        budget -= static_cast<int64_t>(item.tokens.size());
        r.forward_index = static_cast<int64_t>(items.size());
        items.push_back(item);
      }
    }
    if (!items.empty()) {
      try {
        profile.phase(StepPhase::Forward);
        const ForwardResult out = model_.forward(items);
        profile.phase(StepPhase::Consume);
        for (auto& r : running)
          if (r.forward_index >= 0) r.decoder->consume(out, static_cast<size_t>(r.forward_index));
        // A prompt just finished prefilling: keep a fork of its state so later requests that
        // extend this prompt skip it (recurrent states can only be reused at such points).
        for (auto& r : running) {
          if (r.prompt_cached || r.forward_index < 0 || r.decoder->prefilling() ||
              r.decoder->finished() || !options_.prefix_cache_entries || !options_.prefix_cache ||
              (r.drafter && r.drafter->needs_hidden()))
            continue;
          r.prompt_cached = true;
          SequenceState& st = r.decoder->state();
          const int64_t plen = r.decoder->result().stats.prompt_tokens;
          if (st.length != plen || plen < st.rollback_floor) continue;
          if (pool.total_blocks() - reserved - cache.blocks() < blocks_for(pool, plen)) continue;
          const auto& h = r.decoder->history();
          cache.insert({h.begin(), h.begin() + plen}, model_.fork(st, plen));
        }
      } catch (const std::exception& ex) {
        for (auto& r : running)
          if (r.forward_index >= 0) {
            finish(*r.stream, r.decoder->result(), "error", ex.what());
            r.decoder->cancel();
            r.errored = true;
          }
      }
      queue_.update([&](EngineMetrics& m) {
        ++m.forward_calls;
        for (const auto& it : items) m.batch_rows_total += it.tokens.size();
      });
    }

    // Retire finished and cancelled sequences; their memory returns to the pool (or the cache).
    profile.phase(StepPhase::Retire);
    for (auto it = running.begin(); it != running.end();) {
      const bool cancelled = it->stream->cancelled();
      if (!cancelled && !it->decoder->finished()) {
        ++it;
        continue;
      }
      const GenerateResult& res = it->decoder->result();
      if (it->errored) {
        queue_.update([](EngineMetrics& m) { ++m.requests_finished; });
      } else if (cancelled) {
        queue_.update([](EngineMetrics& m) { ++m.requests_cancelled; });
        finish(*it->stream, res, "cancelled", "", it->cached_tokens);
      } else {
        queue_.update([&](EngineMetrics& m) {
          ++m.requests_finished;
          m.generated_tokens += res.tokens.size();
          m.drafted += static_cast<uint64_t>(res.spec.drafted);
          m.accepted += static_cast<uint64_t>(res.spec.accepted);
        });
        finish(*it->stream, res, res.finish_reason, "", it->cached_tokens);
        if (!(it->drafter && it->drafter->needs_hidden())) {
          const auto& h = it->decoder->history();
          auto state = it->decoder->take_state();
          std::vector<int32_t> tokens(h.begin(), h.begin() + state->length);
          cache.insert(std::move(tokens), std::move(state));
        }
      }
      reserved -= it->reserved_blocks;
      it = running.erase(it);
    }
    queue_.update([&](EngineMetrics& m) {
      m.running = running.size();
      m.kv_blocks_total = pool.total_blocks();
      m.kv_blocks_used = pool.total_blocks() - pool.free_blocks();
      m.kv_block_tokens = pool.block_tokens();
    });
    profile.end_step(items);
  }
  // Stopped: whatever is left is cancelled.
  for (auto& r : running) finish(*r.stream, r.decoder->result(), "cancelled");
  for (auto& p : deferred) finish(*p.stream, {}, "cancelled");
  for (auto& p : queue_.pop(SIZE_MAX, false, std::chrono::milliseconds(0)))
    finish(*p.stream, {}, "cancelled");
}

}  // namespace lockstep
