// What the engine thread holds between steps: the jobs waiting and running, the prefix cache, and
// the rules that share KV memory among them (vLLM's scheduler, with recompute preemption).
//
// - Admission, first come first served: a job is admitted when the blocks its prefill needs now
//   (its prompt, or after a preemption its history, less the blocks a prefix-cache hit shares)
//   plus a small reserve for the running sequences' growth are free, or can be freed by evicting
//   cached blocks nobody else holds. Output blocks are not reserved up front.
// - Growth: before each step every running sequence is given the blocks its next item writes
//   (a decode token, a verify block of K + 1, a prefill chunk). When the pool cannot supply them,
//   least recently used cache entries go first, then the most recently admitted running sequence
//   is preempted: its KV and recurrent state are freed and it waits at the front of the queue.
//   Re-admitted, it prefills its history again and carries on; see SequenceDecoder::suspend.
// Tokens never depend on any of this: prefill is invariant to chunking, a token's choice depends
// only on its logits, the history and (seed, position), and drafts never decide a token.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "models/gemma4_assistant.h"
#include "scheduler/engine.h"
#include "scheduler/job.h"
#include "scheduler/prefix_cache.h"

namespace lockstep {

class Scheduler {
 public:
  Scheduler(Model& model, Model* draft, Gemma4Assistant* assistant, const EngineOptions& options,
            RequestQueue& queue);

  // A request taken from the queue waits behind those taken before (and preempted ones).
  void enqueue(RequestQueue::Pending pending);
  bool has_waiting() const { return !waiting_.empty(); }
  bool idle() const { return running_.empty(); }
  size_t open_slots() const;  // sequences that may still start (parallel - running)

  // Admits (or finishes, when cancelled or failing) the first waiting job; false when it must
  // wait for memory. A job that does not fit blocks those behind it.
  bool admit_front();
  // Gives every running sequence the blocks its next item writes, preempting as needed, and
  // returns the step's items: decode and verify blocks first, then prefill chunks within the
  // step's token budget. Who shares the step never changes a sequence's bits.
  std::vector<ForwardItem> build_step();
  // Hands the step's rows to its sequences; caches states whose prefill just ended.
  void consume(const ForwardResult& out);
  // The step's forward threw: its sequences end with that error.
  void fail_step(const std::string& error);
  // Ends finished and cancelled sequences; their memory returns to the pool (or the cache).
  void retire();
  // Queue depth, running count and KV gauges into the metrics.
  void publish_gauges();
  // Stopping: every job left ends "cancelled".
  void cancel_all();

 private:
  void finish(Job& job, const std::string& reason, const std::string& error = "");
  std::unique_ptr<SequenceState> lookup(const Job& job);
  // Builds the job's drafter and decoder (first admission) or resumes it (after a preemption).
  void start(Job& job, std::unique_ptr<SequenceState> state);
  // Frees blocks until `blocks` are free (evicting cached ones); false when it cannot.
  bool make_free(int64_t blocks);
  int64_t reserve_blocks() const;
  // Per running job, the tokens its next item writes at most (0: none this step), with drafts
  // or without (step_drafts).
  std::vector<int64_t> plan(bool drafts) const;
  // Whether this step's decoding sequences draft: not when more of them decode than
  // EngineOptions::spec_max_batch.
  bool step_drafts() const;
  int64_t growth(const Job& job, int64_t tokens) const;
  // Takes the most recently admitted running job's memory and puts it first in line.
  void preempt_newest();

  Model& model_;
  Model* draft_;
  Gemma4Assistant* assistant_;
  const EngineOptions& options_;
  RequestQueue& queue_;
  KvPool& pool_;
  std::unique_ptr<PrefixCache> cache_;  // null when disabled
  std::deque<std::unique_ptr<Job>> waiting_;
  std::vector<std::unique_ptr<Job>> running_;  // in admission order
  std::vector<int64_t> plan_;                  // the current step's, per running job
  bool drafts_ = true;                         // the current step's step_drafts()
};

}  // namespace lockstep
