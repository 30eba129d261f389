// One request's decoding, one forward at a time. It owns the sequence's state, token history,
// sampler and drafter, says what the sequence feeds next (a prefill chunk, or its last token plus
// drafts) and consumes that forward's rows: choosing tokens, accepting drafts, rolling back, and
// checking stop conditions. generate() runs one decoder alone; the scheduler runs many in shared
// forwards. Both therefore execute the same decode logic, and a request's tokens cannot depend on
// which of them ran it.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "decode/constraint_tracker.h"
#include "decode/generate.h"
#include "decode/stop_matcher.h"
#include "decode/token_rules.h"

namespace lockstep {

class SequenceDecoder {
 public:
  // `state` may hold a prefix of the prompt already (from the prefix cache); nullptr: a new one.
  SequenceDecoder(Model& model, std::vector<int32_t> prompt, GenerateOptions options,
                  std::function<bool(int32_t)> on_token = {},
                  std::unique_ptr<SequenceState> state = nullptr);

  bool finished() const { return finished_; }
  // Feeding the prompt, or (after resume) re-feeding the history; false while decoding.
  bool prefilling() const { return prefilled_ < prefill_end_; }
  // Prefilling a history whose next token was chosen before a preemption: no row chooses.
  bool refilling() const { return prefilling() && !result_.tokens.empty(); }

  // The next forward's item for this sequence. `budget` caps a prefill chunk (0: the decoder's
  // own prefill_chunk, or the whole prompt); `drafts` false runs a decode step without drafts
  // (the scheduler's per-step speculation; drafters catch up at their next round). The item's
  // tokens stay valid until consume().
  ForwardItem next_item(int64_t budget = 0, bool drafts = true);
  // The most tokens next_item(budget, drafts) can hold (drafters may propose fewer, constraints
  // cut more), with no side effect: what the scheduler grows the KV cache by before the step.
  int64_t next_item_tokens(int64_t budget = 0, bool drafts = true) const;
  // Processes this sequence's rows of a forward result (item index `index` in that forward).
  void consume(const ForwardResult& out, size_t index);
  // Stops with finish_reason "cancelled" (frees nothing by itself; the owner drops the decoder).
  void cancel();

  // Preemption. suspend() drops the sequence's state (its KV blocks and recurrent state go back)
  // and the drafter's state derived from it, keeping everything that decides tokens: the history,
  // the sampler, the constraint and stop-string state, the counts. resume() takes a new state
  // holding a prefix of the history (from the prefix cache; nullptr: empty) and re-feeds the
  // rest of the history but its last token through the one prefill path, choosing nothing;
  // decoding then continues exactly as before: prefill is invariant to chunking and a token's
  // choice depends only on its logits, the history and (seed, position). Tokens already
  // emitted are not emitted again. Only between forwards (after consume, before next_item).
  void suspend();
  void resume(std::unique_ptr<SequenceState> state);
  bool suspended() const { return !seq_; }
  const GenerateResult& result() const { return result_; }
  GenerateResult& result() { return result_; }
  const std::vector<int32_t>& history() const { return history_; }
  SequenceState& state();
  std::unique_ptr<SequenceState> take_state() { return std::move(seq_); }

 private:
  // Chooses the token of output row `row` of `out` (the backend's id or the sampler's choice on
  // the row's logits), then emits it.
  bool choose_and_emit(const ForwardResult& out, int64_t row);
  // consume() without the bookkeeping after the round (constraint state, finish statistics).
  void consume_rows(const ForwardResult& out, size_t index);
  // The rules of the item's output rows, set as item.choose (none: the item downloads logits).
  void make_rules(ForwardItem& item);
  // Takes the round's masks and sets them on the choosing rules (ForwardItem::before_choose).
  void mask_rules();
  TokenLogprob token_logprob(const float* logits, int64_t V, int32_t token) const;
  // Tokens of the next prefill chunk for `budget` (see next_item), and of the next verify block
  // at most.
  int64_t prefill_chunk_tokens(int64_t budget) const;
  int draft_tokens() const;
  // Checks a state handed to the constructor or resume() and starts prefilling after it.
  void adopt(std::unique_ptr<SequenceState> state);

  Model& model_;
  GenerateOptions options_;
  std::function<bool(int32_t)> on_token_;
  Sampler sampler_;
  std::unique_ptr<SequenceState> seq_;
  std::unique_ptr<StopMatcher> stops_;  // when options_.stop is not empty
  std::vector<int32_t> history_;
  size_t prompt_len_;
  int64_t prefilled_ = 0;      // history tokens already in the cache while prefilling
  // History tokens the cache must hold before decoding: the prompt, or after resume() the
  // history but its last (chosen, not yet run) token.
  int64_t prefill_end_ = 0;
  std::vector<int32_t> block_;  // tokens of the pending item
  bool hidden_drafter_;
  // Items carry rules: no logprobs wanted, no logit_bias, LOCKSTEP_HOST_SAMPLING unset. Under a
  // grammar each row's rule carries the row's mask (TokenRule::allowed), so the backend chooses
  // among the allowed ids where the logits are; a reasoning budget's forced rows skip the choice
  // and take the forced token.
  bool backend_chooses_;
  // When options_.constraint or options_.reasoning_budget is set.
  std::unique_ptr<ConstraintTracker> constraint_;
  int64_t round_row_ = 0;  // the pending item's row being chosen (its mask's index)
  TokenRules rules_;      // the pending item's
  size_t mask_base_ = 0, mask_rows_ = 0;  // rules_[mask_base_ + j] chooses plan row j
  bool rules_masked_ = false;             // mask_rules() has run for the pending item
  bool finished_ = false;
  GenerateResult result_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace lockstep
