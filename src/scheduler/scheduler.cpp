#include "scheduler/scheduler.h"

#include <algorithm>

#include "core/error.h"
#include "decode/speculative/drafters.h"

namespace lockstep {

namespace {

// Tokens drafted per round for this request (0 without speculation).
int draft_width_of(const EngineRequest& r) {
  if (r.spec == "none") return 0;
  return r.draft_width > 0 ? r.draft_width : default_draft_width(r.spec);
}

// The tokens a job must hold before it decodes: its prompt, or (preempted after choosing output)
// its history less the last, chosen but not yet run, token (SequenceDecoder::resume).
int64_t fill_tokens(const Job& job) {
  if (job.admitted() && !job.decoder->result().tokens.empty())
    return static_cast<int64_t>(job.decoder->history().size()) - 1;
  return static_cast<int64_t>(job.request.prompt.size());
}

}  // namespace

Scheduler::Scheduler(Model& model, Model* draft, Gemma4Assistant* assistant,
                     const EngineOptions& options, RequestQueue& queue)
    : model_(model),
      draft_(draft),
      assistant_(assistant),
      options_(options),
      queue_(queue),
      pool_(model.kv_pool()) {
  if (options_.prefix_cache && options_.prefix_cache_entries > 0)
    cache_ = make_prefix_cache(model_, options_.prefix_cache_entries);
}

void Scheduler::enqueue(RequestQueue::Pending pending) {
  auto job = std::make_unique<Job>();
  job->request = std::move(pending.request);
  job->stream = std::move(pending.stream);
  waiting_.push_back(std::move(job));
}

size_t Scheduler::open_slots() const {
  const auto parallel = static_cast<size_t>(options_.parallel);
  return running_.size() < parallel ? parallel - running_.size() : 0;
}

void Scheduler::finish(Job& job, const std::string& reason, const std::string& error) {
  StreamEvent e;
  e.kind = StreamEvent::Kind::Finish;
  e.finish_reason = reason;
  e.error = error;
  e.cached_tokens = job.cached_tokens;
  if (job.decoder) {
    const GenerateResult& r = job.decoder->result();
    e.text_limit = r.text_limit;
    e.stats = r.stats;
    e.spec = r.spec;
  }
  queue_.emit(*job.stream, std::move(e));
}

int64_t Scheduler::reserve_blocks() const {
  if (running_.empty()) return 0;  // alone, a request only needs to fit
  return options_.kv_reserve_blocks >= 0 ? options_.kv_reserve_blocks
                                         : static_cast<int64_t>(running_.size());
}

bool Scheduler::make_free(int64_t blocks) {
  if (pool_.free_blocks() >= blocks) return true;
  // Evict only when that is enough: cached blocks are worth keeping otherwise.
  if (!cache_ || pool_.free_blocks() + cache_->reclaimable_blocks() < blocks) return false;
  return cache_->free_up(blocks);
}

std::unique_ptr<SequenceState> Scheduler::lookup(const Job& job) {
  if (!cache_ || job.reads_hidden()) return nullptr;
  // A resumed job's history less its last token is what it must hold again; lookup leaves the
  // last token out by itself.
  return cache_->lookup(job.admitted() ? job.decoder->history() : job.request.prompt);
}

bool Scheduler::admit_front() {
  Job& job = *waiting_.front();
  if (job.stream->cancelled()) {
    queue_.update([](EngineMetrics& m) { ++m.requests_cancelled; });
    finish(job, "cancelled");
    waiting_.pop_front();
    return true;
  }
  if (job.blocked_on > 0 && !running_.empty() &&
      pool_.free_blocks() + (cache_ ? cache_->reclaimable_blocks() : 0) < job.blocked_on)
    return false;
  try {
    if (!job.drafter)
      job.drafter = make_drafter(job.request.spec, model_, draft_, job.request.options.sampling,
                                 assistant_);
    std::unique_ptr<SequenceState> state = lookup(job);
    // Blocks the prefill writes that the hit does not bring (a snapshot's copied partial block is
    // among the hit's).
    const int64_t shared = state ? static_cast<int64_t>(state->kv_blocks.size()) : 0;
    const int64_t need = pool_.blocks_for(fill_tokens(job)) - shared;
    if (!make_free(need + reserve_blocks())) {
      job.blocked_on = need + reserve_blocks();
      if (!running_.empty()) return false;  // wait for running sequences to end
      // Alone with the cache emptied: only a request over the pool's capacity gets here.
      finish(job, "error",
             "not enough KV cache memory for this request: it needs " +
                 std::to_string(need) + " blocks of " + std::to_string(pool_.block_tokens()) +
                 " tokens, the pool has " + std::to_string(pool_.free_blocks()) + " free of " +
                 std::to_string(pool_.total_blocks()));
      waiting_.pop_front();
      return true;
    }
    start(job, std::move(state));
  } catch (const std::exception& ex) {
    finish(job, "error", ex.what());
    waiting_.pop_front();
    return true;
  }
  running_.push_back(std::move(waiting_.front()));
  waiting_.pop_front();
  return true;
}

void Scheduler::start(Job& job, std::unique_ptr<SequenceState> state) {
  const int64_t reused = state ? state->length : 0;
  if (reused > 0)
    queue_.update([&](EngineMetrics& m) {
      ++m.prefix_cache_hits;
      m.prefix_tokens_reused += static_cast<uint64_t>(reused);
    });
  job.cache_prefill = true;
  job.blocked_on = 0;
  if (job.admitted()) {
    job.decoder->resume(std::move(state));
    return;
  }
  const EngineRequest& r = job.request;
  GenerateOptions o = r.options;
  o.drafter = job.drafter.get();
  o.draft_width = draft_width_of(r);
  o.top_logprobs = r.top_logprobs;
  RequestStream* stream = job.stream.get();
  // The callback outlives this scope; it finds its decoder (for logprobs) through `self`.
  auto self = std::make_shared<SequenceDecoder*>(nullptr);
  job.decoder = std::make_unique<SequenceDecoder>(
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
  *self = job.decoder.get();
  job.cached_tokens = reused;
  queue_.update([&](EngineMetrics& m) { m.prompt_tokens += r.prompt.size(); });
}

bool Scheduler::step_drafts() const {
  if (options_.spec_max_batch <= 0) return true;
  int decoding = 0;
  for (const auto& job : running_) {
    const SequenceDecoder& d = *job->decoder;
    decoding += !d.finished() && !job->stream->cancelled() && !d.prefilling();
  }
  return decoding <= options_.spec_max_batch;
}

std::vector<int64_t> Scheduler::plan(bool drafts) const {
  // The same passes as build_step: decode and verify blocks first, then prefill chunks while the
  // step's token budget lasts (counted here with full verify blocks, an upper bound).
  std::vector<int64_t> tokens(running_.size(), 0);
  int64_t budget = options_.max_step_tokens;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < running_.size(); ++i) {
      const SequenceDecoder& d = *running_[i]->decoder;
      if (d.finished() || running_[i]->stream->cancelled()) continue;
      if ((pass == 0) == d.prefilling()) continue;
      if (pass == 1 && budget <= 0) break;
      tokens[i] = d.next_item_tokens(pass == 1 ? std::min(options_.prefill_chunk, budget) : 0, drafts);
      budget -= tokens[i];
    }
  return tokens;
}

int64_t Scheduler::growth(const Job& job, int64_t tokens) const {
  if (tokens == 0) return 0;
  SequenceState& s = job.decoder->state();
  // Blocks from the one holding position `length` on are the sequence's own (KvPool::writable),
  // so only blocks past those it holds are new.
  return std::max<int64_t>(
      0, pool_.blocks_for(s.length + tokens) - static_cast<int64_t>(s.kv_blocks.size()));
}

void Scheduler::preempt_newest() {
  std::unique_ptr<Job> job = std::move(running_.back());
  running_.pop_back();
  SequenceDecoder& d = *job->decoder;
  // Its KV stays findable while the pool can spare it: the cache keeps what nobody needs now,
  // and make_free evicts it only after older entries.
  if (cache_) cache_->insert(d.history(), d.state());
  d.suspend();
  queue_.update([](EngineMetrics& m) { ++m.preemptions; });
  waiting_.push_front(std::move(job));  // first in line, ahead of requests never admitted
}

std::vector<ForwardItem> Scheduler::build_step() {
  for (auto& job : running_) job->forward_index = -1;
  // Growth: the pool must supply every block the step writes before the forward starts.
  for (;;) {
    // (Preemption below can bring the decoding sequences under the limit: decided each time.)
    drafts_ = step_drafts();
    plan_ = plan(drafts_);
    int64_t need = 0;
    for (size_t i = 0; i < running_.size(); ++i) need += growth(*running_[i], plan_[i]);
    if (make_free(need)) break;
    if (running_.size() > 1) {
      preempt_newest();
      continue;
    }
    // Alone and still short: only a sequence longer than the pool gets here (the context check
    // at submission makes that impossible unless the pool is shared with something else).
    Job& job = *running_.front();
    finish(job, "error", "not enough KV cache memory to continue this request");
    job.decoder->cancel();
    job.errored = true;
    return {};
  }
  if (!drafts_) queue_.update([](EngineMetrics& m) { ++m.spec_paused_steps; });
  std::vector<ForwardItem> items;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < running_.size(); ++i) {
      Job& job = *running_[i];
      if (plan_[i] == 0 || (pass == 0) == job.decoder->prefilling()) continue;
      job.was_prefilling = job.decoder->prefilling();
      job.forward_index = static_cast<int64_t>(items.size());
      items.push_back(job.decoder->next_item(pass == 1 ? plan_[i] : 0, drafts_));
    }
  return items;
}

void Scheduler::consume(const ForwardResult& out) {
  for (auto& job : running_)
    if (job->forward_index >= 0) job->decoder->consume(out, static_cast<size_t>(job->forward_index));
  // A prefill just ended (a prompt's, or a resumed history's): keep its state so later requests
  // extending it skip it (recurrent states can only be reused at such exact points).
  if (!cache_) return;
  for (auto& job : running_) {
    SequenceDecoder& d = *job->decoder;
    if (job->forward_index < 0 || !job->was_prefilling || d.prefilling() || d.finished() ||
        !job->cache_prefill)
      continue;
    job->cache_prefill = false;
    cache_->insert(d.history(), d.state());
  }
}

void Scheduler::fail_step(const std::string& error) {
  for (auto& job : running_)
    if (job->forward_index >= 0) {
      finish(*job, "error", error);
      job->decoder->cancel();
      job->errored = true;
    }
}

void Scheduler::retire() {
  for (auto it = running_.begin(); it != running_.end();) {
    Job& job = **it;
    const bool cancelled = job.stream->cancelled();
    if (!cancelled && !job.decoder->finished()) {
      ++it;
      continue;
    }
    const GenerateResult& res = job.decoder->result();
    if (job.errored) {
      queue_.update([](EngineMetrics& m) { ++m.requests_finished; });
    } else if (cancelled) {
      queue_.update([](EngineMetrics& m) { ++m.requests_cancelled; });
      finish(job, "cancelled");
    } else {
      queue_.update([&](EngineMetrics& m) {
        ++m.requests_finished;
        m.generated_tokens += res.tokens.size();
        m.drafted += static_cast<uint64_t>(res.spec.drafted);
        m.accepted += static_cast<uint64_t>(res.spec.accepted);
      });
      finish(job, res.finish_reason);
      if (cache_) cache_->insert(job.decoder->history(), job.decoder->state());
    }
    it = running_.erase(it);  // the decoder's state lets go of its blocks
  }
}

void Scheduler::publish_gauges() {
  queue_.update([&](EngineMetrics& m) {
    // Taken from the queue but not admitted (waiting for KV memory, or preempted) still counts
    // as queued.
    m.queue_depth = waiting_.size();
    m.running = running_.size();
    m.kv_blocks_total = pool_.total_blocks();
    m.kv_blocks_used = pool_.total_blocks() - pool_.free_blocks();
    m.kv_blocks_cached = cache_ ? cache_->blocks() : 0;
    m.kv_block_tokens = pool_.block_tokens();
  });
}

void Scheduler::cancel_all() {
  for (auto& job : running_) finish(*job, "cancelled");
  for (auto& job : waiting_) finish(*job, "cancelled");
  running_.clear();
  waiting_.clear();
}

}  // namespace lockstep
