#include "decode/speculative/draft_model_drafter.h"

#include "decode/prefill.h"

namespace lockstep {

DraftModelDrafter::DraftModelDrafter(Model& draft, const SamplingParams& sampling)
    : model_(draft), sampler_(sampling), seq_(draft.new_sequence()) {}

void DraftModelDrafter::forget() {
  model_.truncate(*seq_, 0);
  consumed_.clear();
}

std::vector<int32_t> DraftModelDrafter::propose(std::span<const int32_t> history,
                                                int64_t prompt_len, int k) {
  if (k <= 0) return {};
  // Keep the cached prefix shared with history; feed the rest through the one prefill path.
  size_t keep = 0;
  while (keep < consumed_.size() && keep < history.size() && consumed_[keep] == history[keep])
    ++keep;
  if (keep == history.size()) --keep;  // the last token must be run to get its logits
  model_.truncate(*seq_, static_cast<int64_t>(keep));
  consumed_.resize(keep);
  // The round writes positions up to history + k - 2. What the pool cannot hold is not drafted
  // (drafts never decide tokens); when not even the history fits, the cache is let go.
  const KvPool& pool = model_.kv_pool();
  const int64_t held = static_cast<int64_t>(seq_->kv_blocks.size());
  const auto fits = [&](int64_t positions) {
    return pool.blocks_for(positions) - held <= pool.free_blocks();
  };
  while (k > 0 && !fits(static_cast<int64_t>(history.size()) + k - 1)) --k;
  if (k == 0) {
    forget();
    return {};
  }
  std::vector<int32_t> context(history.begin(), history.end());
  std::vector<int32_t> drafts;
  const int64_t V = model_.config().vocab_size;
  // The backend chooses each draft from the last row (only ids cross from a GPU).
  const bool on_backend = backend_sampling_enabled();
  rules_.clear();
  if (on_backend) rules_.add(sampler_, {context, prompt_len}, V);
  ForwardResult out = prefill(model_, *seq_, history, 0, PrefillRows::Last, rules_.rules());
  consumed_.assign(history.begin(), history.end());

  for (int i = 0; i < k; ++i) {
    const int32_t t = chosen_token(out, 0, sampler_, {context, prompt_len}, V);
    drafts.push_back(t);
    context.push_back(t);
    if (i + 1 == k) break;
    rules_.clear();
    if (on_backend) rules_.add(sampler_, {context, prompt_len}, V);
    ForwardItem item{seq_.get(), {&context.back(), 1}, ForwardItem::Logits::Last};
    item.choose = rules_.rules();
    item.hidden = false;
    out = model_.forward({&item, 1});
    consumed_.push_back(t);
  }
  return drafts;
}

}  // namespace lockstep
