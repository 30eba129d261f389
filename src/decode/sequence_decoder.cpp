#include "decode/sequence_decoder.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "decode/prefill.h"

namespace lockstep {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

SequenceDecoder::SequenceDecoder(Model& model, std::vector<int32_t> prompt,
                                 GenerateOptions options, std::function<bool(int32_t)> on_token,
                                 std::unique_ptr<SequenceState> state)
    : model_(model),
      options_(std::move(options)),
      on_token_(std::move(on_token)),
      sampler_(options_.sampling),
      history_(std::move(prompt)),
      prompt_len_(history_.size()),
      prefill_end_(static_cast<int64_t>(prompt_len_)),
      hidden_drafter_(options_.drafter && options_.drafter->needs_hidden()),
      backend_chooses_(options_.top_logprobs < 0 && !options_.sampling.has_logit_bias() &&
                       backend_sampling_enabled()),
      t0_(std::chrono::steady_clock::now()) {
  if (options_.max_tokens < 0) fail("max tokens must be >= 0, got ", options_.max_tokens);
  if (!options_.stop.empty()) {
    if (!options_.tokenizer)
      fail("stop strings need a tokenizer (the model directory has no tokenizer.json)");
    stops_ = std::make_unique<StopMatcher>(*options_.tokenizer, options_.stop);
  }
  if (options_.drafter && options_.draft_width < 1)
    fail("draft width must be >= 1, got ", options_.draft_width);
  if (history_.empty()) fail("the prompt is empty (at least one token is needed)");
  if (options_.constraint || options_.reasoning_budget)
    constraint_ = std::make_unique<ConstraintTracker>(options_.constraint, options_.reasoning_budget);
  result_.stats.prompt_tokens = static_cast<int64_t>(prompt_len_);
  result_.finish_reason = "length";
  if (options_.max_tokens == 0) finished_ = true;
  adopt(std::move(state));
}

void SequenceDecoder::adopt(std::unique_ptr<SequenceState> state) {
  seq_ = state ? std::move(state) : model_.new_sequence();
  prefilled_ = seq_->length;
  // A prompt's last token must run to give the first output token's logits; a history being
  // re-fed after a preemption already has its next token, so it may be cached whole.
  if (prefilled_ > prefill_end_ || (prefilled_ == prefill_end_ && result_.tokens.empty()))
    fail("decoder: the given state already holds ", prefilled_, " of ", prefill_end_,
         " tokens to prefill (at least one must remain to produce logits)");
  if (hidden_drafter_ && prefilled_ > 0)
    fail("decoder: an MTP drafter needs every prompt position's hidden state; do not reuse a prefix");
  if (options_.drafter) options_.drafter->bind_target(seq_.get());
}

SequenceState& SequenceDecoder::state() {
  LOCKSTEP_CHECK(seq_, "the decoder is suspended: it holds no sequence state");
  return *seq_;
}

void SequenceDecoder::suspend() {
  LOCKSTEP_CHECK(seq_ && !finished_, "suspend: the decoder is finished or suspended already");
  seq_.reset();  // its KV blocks and recurrent state go back now
  prefilled_ = 0;
  if (options_.drafter) {
    options_.drafter->bind_target(nullptr);
    options_.drafter->forget();
  }
}

void SequenceDecoder::resume(std::unique_ptr<SequenceState> state) {
  LOCKSTEP_CHECK(!seq_, "resume: the decoder was not suspended");
  // With output already chosen, the cache must hold the history but its last token (what it
  // held when suspended); before the first token, the prompt (its last row chooses that token).
  prefill_end_ = result_.tokens.empty() ? static_cast<int64_t>(prompt_len_)
                                        : static_cast<int64_t>(history_.size()) - 1;
  adopt(std::move(state));
}

int64_t SequenceDecoder::prefill_chunk_tokens(int64_t budget) const {
  const int64_t chunk = budget > 0 ? budget : options_.prefill_chunk;
  const int64_t rest = prefill_end_ - prefilled_;
  return chunk > 0 ? std::min(chunk, rest) : rest;
}

int SequenceDecoder::draft_tokens() const {
  if (!options_.drafter) return 0;
  // The decoder never runs a token past max_tokens: drafts are cut to the room left.
  const int64_t room = options_.max_tokens - static_cast<int64_t>(result_.tokens.size()) - 1;
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(options_.draft_width, room)));
}

int64_t SequenceDecoder::next_item_tokens(int64_t budget, bool drafts) const {
  return prefilling() ? prefill_chunk_tokens(budget) : 1 + (drafts ? draft_tokens() : 0);
}

ForwardItem SequenceDecoder::next_item(int64_t budget, bool drafts) {
  LOCKSTEP_CHECK(!finished_, "next_item on a finished decoder");
  ForwardItem item;
  item.seq = seq_.get();
  if (prefilling()) {
    // A refill only rebuilds the cache: its rows are wanted for a drafter's hiddens at most.
    const PrefillRows rows = hidden_drafter_ ? PrefillRows::Every
                             : refilling()   ? PrefillRows::None
                                             : PrefillRows::Last;
    item = prefill_item(*seq_, std::span<const int32_t>(history_).first(prefill_end_),
                        prefill_chunk_tokens(budget), rows);
    block_.assign(item.tokens.begin(), item.tokens.end());
    if (constraint_ && !refilling() &&
        prefilled_ + static_cast<int64_t>(block_.size()) == prefill_end_)
      constraint_->plan({});  // the final chunk's last row chooses the first output token
  } else {
    // The last chosen token (not yet run) and the drafts that may follow it.
    block_.assign(1, history_.back());
    if (options_.drafter && drafts) {
      const int k = draft_tokens();
      const int64_t V = model_.config().vocab_size;
      if (k > 0)
        for (int32_t d : options_.drafter->propose(history_, static_cast<int64_t>(prompt_len_), k))
          if (d >= 0 && d < V && static_cast<int>(block_.size()) <= k) block_.push_back(d);
      ++result_.spec.rounds;
      result_.spec.drafted += static_cast<int64_t>(block_.size()) - 1;
    }
    if (constraint_) {
      // Drafts from the first one the constraint forbids on are rejected without being run.
      const size_t allowed = constraint_->plan(std::span<const int32_t>(block_).subspan(1));
      block_.resize(1 + allowed);
    }
    item.logits = block_.size() == 1 ? ForwardItem::Logits::Last : ForwardItem::Logits::All;
    item.keep_rollback = block_.size() > 1;
  }
  item.tokens = block_;
  item.hidden = hidden_drafter_;
  make_rules(item);
  return item;
}

void SequenceDecoder::make_rules(ForwardItem& item) {
  rules_.clear();
  rules_masked_ = false;
  if (!backend_chooses_ || item.logits == ForwardItem::Logits::None) return;
  const int64_t V = model_.config().vocab_size;
  const int64_t n = static_cast<int64_t>(block_.size());
  const std::span<const int32_t> history = history_;
  const auto prompt_len = static_cast<int64_t>(prompt_len_);
  size_t choosing = 0;  // the rules at the end that choose a token: plan rows 0 .. choosing - 1
  if (prefilling()) {
    // Only the prompt's last row chooses a token (a refill's none); other output rows are there
    // for their hidden.
    const bool chooses = !refilling() && prefilled_ + n == prefill_end_;
    const int64_t rows = item.logits == ForwardItem::Logits::Last ? 1 : n;
    for (int64_t i = 0; i + 1 < rows; ++i) rules_.add_skip();
    if (chooses) {
      rules_.add(sampler_, {history, prompt_len}, V);
      choosing = 1;
    } else {
      rules_.add_skip();
    }
  } else {
    rules_.add_block(sampler_, history, prompt_len, std::span<const int32_t>(block_).subspan(1), V);
    choosing = block_.size();
  }
  item.choose = rules_.rules();
  if (constraint_ && choosing > 0) {
    // Row j of the plan carries its own mask (the prefix with drafts 1..j accepted), so a verify
    // block's rows are masked position by position on the backend as they were on the host. A
    // forced row needs no choice at all.
    mask_base_ = rules_.size() - choosing;
    mask_rows_ = choosing;
    for (size_t j = 0; j < choosing; ++j)
      if (constraint_->forced(j) >= 0) rules_.set_skip(mask_base_ + j);
    if (constraint_->masks_taken())
      mask_rules();
    else  // the masks are taken while the device runs the forward
      item.before_choose = [this] { mask_rules(); };
  }
}

void SequenceDecoder::mask_rules() {
  constraint_->take_masks();
  for (size_t j = 0; j < mask_rows_; ++j)
    if (constraint_->forced(j) < 0)
      if (const constraints::TokenMask* m = constraint_->mask(j))
        rules_.set_allowed(mask_base_ + j, *m);
  rules_masked_ = true;
}

TokenLogprob SequenceDecoder::token_logprob(const float* logits, int64_t V, int32_t token) const {
  double mx = -INFINITY, sum = 0;
  for (int64_t i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  for (int64_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double log_z = mx + std::log(sum);
  TokenLogprob lp;
  lp.token = token;
  lp.logprob = static_cast<float>(logits[token] - log_z);
  const int64_t n = std::min<int64_t>(options_.top_logprobs, V);
  std::vector<int32_t> ids(V);
  for (int64_t i = 0; i < V; ++i) ids[i] = static_cast<int32_t>(i);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int64_t i = 0; i < n; ++i)
    lp.top.emplace_back(ids[i], static_cast<float>(logits[ids[i]] - log_z));
  return lp;
}

bool SequenceDecoder::choose_and_emit(const ForwardResult& out, int64_t row) {
  const int64_t V = model_.config().vocab_size;
  const TokenHistory history{history_, static_cast<int64_t>(prompt_len_)};
  int32_t token;
  const size_t plan_row = constraint_ ? static_cast<size_t>(round_row_++) : 0;
  if (constraint_) constraint_->take_masks();  // done already when the rules carried them
  const constraints::TokenMask* mask = constraint_ ? constraint_->mask(plan_row) : nullptr;
  if (constraint_ && constraint_->forced(plan_row) >= 0) {
    // The reasoning budget's close: the same token whatever the logits (or the backend) say.
    token = constraint_->forced(plan_row);
  } else if (mask && !(!out.tokens.empty() && out.tokens[row] >= 0)) {
    // The item had no rules (logprobs or logit_bias wanted, or LOCKSTEP_HOST_SAMPLING=1): the
    // host masks the downloaded row and chooses.
    LOCKSTEP_CHECK(static_cast<int64_t>(out.logits.size()) >= (row + 1) * V,
                   "a constrained row came back without logits");
    token = sampler_.choose({&out.logits[row * V], static_cast<size_t>(V)}, history,
                            static_cast<int64_t>(history_.size()), *mask);
  } else if (mask) {
    // The backend chose under the row's mask (TokenRule::allowed), as Sampler::choose with the
    // mask would: the same id, and the same refusal when no allowed token had a finite logit.
    LOCKSTEP_CHECK(rules_masked_, "the backend chose a constrained row without its mask");
    token = out.tokens[row];
    if (!mask->test(token))
      fail("constrained sampling: no allowed token has a finite logit at position ",
           history_.size());
  } else {
    token = chosen_token(out, row, sampler_, history, V);
  }
  if (options_.top_logprobs >= 0)
    result_.logprobs.push_back(token_logprob(&out.logits[row * V], V, token));
  history_.push_back(token);
  result_.tokens.push_back(token);
  if (on_token_ && !on_token_(token)) {
    result_.finish_reason = "cancelled";
    return false;
  }
  const auto& eos = options_.eos_ids;
  if (std::find(eos.begin(), eos.end(), token) != eos.end() ||
      (constraint_ && constraint_->is_eos(token))) {
    result_.finish_reason = "stop";
    return false;
  }
  if (stops_) {
    const size_t at = stops_->push(token);
    if (at != std::string::npos) {
      result_.finish_reason = "stop";
      result_.text_limit = at;
      return false;
    }
  }
  return static_cast<int64_t>(result_.tokens.size()) < options_.max_tokens;
}

void SequenceDecoder::consume(const ForwardResult& out, size_t index) {
  const size_t emitted_before = result_.tokens.size();
  round_row_ = 0;
  consume_rows(out, index);
  if (constraint_ && result_.tokens.size() > emitted_before) {
    constraint_->settle(std::span<const int32_t>(result_.tokens).subspan(emitted_before));
    if (!finished_ && constraint_->complete()) {
      finished_ = true;
      result_.finish_reason = "stop";
    }
  }
  if (finished_) {
    result_.stats.generated_tokens = static_cast<int64_t>(result_.tokens.size());
    result_.stats.decode_seconds = seconds_since(t0_);
  }
}

void SequenceDecoder::consume_rows(const ForwardResult& out, size_t index) {
  const int64_t H = model_.config().hidden_size;
  const int64_t first = out.first_row[index];
  const int64_t block_start = seq_->length - static_cast<int64_t>(block_.size());
  if (hidden_drafter_) {
    // Such a decoder asks for every row of every item, so there is one hidden row per token.
    const int64_t rows = static_cast<int64_t>(block_.size());
    options_.drafter->observe_hidden(
        block_start, {&out.hidden[first * H], static_cast<size_t>(rows * H)});
  }
  if (prefilling()) {
    const bool refill = refilling();
    prefilled_ += static_cast<int64_t>(block_.size());
    if (prefilling()) return;  // more chunks to come
    if (refill) return;  // caught up: the next item runs history_.back(), as before suspend()
    result_.stats.prefill_seconds = seconds_since(t0_);
    t0_ = std::chrono::steady_clock::now();
    const int64_t last = hidden_drafter_ ? first + static_cast<int64_t>(block_.size()) - 1 : first;
    if (!choose_and_emit(out, last)) finished_ = true;
  } else {
    // Row i holds the logits after block[i]; the token chosen there is kept, and the next row is
    // only meaningful if that token equals the draft the target consumed after block[i].
    for (size_t i = 0; i < block_.size(); ++i) {
      const bool running = choose_and_emit(out, first + static_cast<int64_t>(i));
      const bool draft_matches = i + 1 < block_.size() && history_.back() == block_[i + 1];
      if (draft_matches) ++result_.spec.accepted;
      if (!running) finished_ = true;
      if (!running || !draft_matches) break;
    }
    // The cache must hold exactly the history minus its last (not yet run) token.
    const int64_t valid = static_cast<int64_t>(history_.size()) - 1;
    if (seq_->length > valid) model_.truncate(*seq_, valid);
  }
}

void SequenceDecoder::cancel() {
  if (finished_) return;
  finished_ = true;
  result_.finish_reason = "cancelled";
  result_.stats.generated_tokens = static_cast<int64_t>(result_.tokens.size());
}

}  // namespace lockstep
