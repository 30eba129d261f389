#include "decode/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "decode/prefill.h"

namespace lockstep {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Position of the earliest stop string in `text`, or npos.
size_t find_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t best = std::string::npos;
  for (const auto& s : stops)
    if (!s.empty()) best = std::min(best, text.find(s));
  return best;
}
}  // namespace

GenerateResult generate(Model& model, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const std::function<bool(int32_t)>& on_token) {
  if (options.max_tokens < 0) fail("max tokens must be >= 0, got ", options.max_tokens);
  if (!options.stop.empty() && !options.detokenize)
    fail("stop strings need a tokenizer (the model directory has no tokenizer.json)");
  if (options.drafter && options.draft_width < 1)
    fail("draft width must be >= 1, got ", options.draft_width);
  Sampler sampler(options.sampling);
  GenerateResult r;
  r.stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  r.finish_reason = "length";
  if (options.max_tokens == 0) return r;

  auto seq = model.new_sequence();
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  const int64_t V = model.config().vocab_size;

  auto t0 = std::chrono::steady_clock::now();
  // A drafter that reads target hiddens (MTP) needs them for every prompt position.
  const bool hidden_drafter = options.drafter && options.drafter->needs_hidden();
  ForwardResult out = prefill(model, *seq, prompt, hidden_drafter ? 0 : options.prefill_chunk,
                              hidden_drafter);
  if (hidden_drafter) options.drafter->observe_hidden(0, out.hidden);
  // Row of the logits that choose the first generated token.
  const int64_t first_row = out.rows - 1;
  r.stats.prefill_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();

  // Chooses the token at the next position from logits row `row`, emits it and checks the stop
  // conditions; returns false when generation is over.
  auto choose_and_emit = [&](int64_t row) {
    const int32_t token = sampler.choose({&out.logits[row * V], static_cast<size_t>(V)},
                                         {history, prompt_len},
                                         static_cast<int64_t>(history.size()));
    history.push_back(token);
    r.tokens.push_back(token);
    if (on_token && !on_token(token)) {
      r.finish_reason = "cancelled";
      return false;
    }
    if (std::find(options.eos_ids.begin(), options.eos_ids.end(), token) != options.eos_ids.end()) {
      r.finish_reason = "stop";
      return false;
    }
    if (!options.stop.empty()) {
      const size_t at = find_stop(options.detokenize(r.tokens), options.stop);
      if (at != std::string::npos) {
        r.finish_reason = "stop";
        r.text_limit = at;
        return false;
      }
    }
    return static_cast<int64_t>(r.tokens.size()) < options.max_tokens;
  };

  bool running = choose_and_emit(first_row);
  std::vector<int32_t> block;
  while (running) {
    // The block: the last chosen token (not yet run) and the drafts that may follow it.
    block.assign(1, history.back());
    if (options.drafter) {
      const int64_t room = options.max_tokens - static_cast<int64_t>(r.tokens.size()) - 1;
      const int k = static_cast<int>(std::min<int64_t>(options.draft_width, room));
      if (k > 0) {
        const auto drafts = options.drafter->propose(history, prompt_len, k);
        for (int32_t d : drafts)
          if (d >= 0 && d < V && static_cast<int>(block.size()) <= k) block.push_back(d);
      }
      ++r.spec.rounds;
      r.spec.drafted += static_cast<int64_t>(block.size()) - 1;
    }
    ForwardItem item;
    item.seq = seq.get();
    item.tokens = block;
    item.logits = block.size() == 1 ? ForwardItem::Logits::Last : ForwardItem::Logits::All;
    item.keep_rollback = block.size() > 1;
    const int64_t block_start = seq->length;
    out = model.forward({&item, 1});
    if (hidden_drafter) options.drafter->observe_hidden(block_start, out.hidden);
    // Row i holds the logits after block[i]; the token chosen there is kept, and the next row is
    // only meaningful if that token equals the draft the target consumed after block[i].
    for (size_t i = 0; i < block.size(); ++i) {
      running = choose_and_emit(static_cast<int64_t>(i));
      const bool draft_matches = i + 1 < block.size() && history.back() == block[i + 1];
      if (draft_matches) ++r.spec.accepted;
      if (!running || !draft_matches) break;
    }
    // The cache must hold exactly history minus its last (not yet run) token.
    const int64_t valid = static_cast<int64_t>(history.size()) - 1;
    if (seq->length > valid) model.truncate(*seq, valid);
  }
  r.stats.generated_tokens = static_cast<int64_t>(r.tokens.size());
  r.stats.decode_seconds = seconds_since(t0);
  return r;
}

}  // namespace lockstep
