#include "decode/speculative/mtp_drafter.h"

#include <algorithm>

#include "core/error.h"

namespace lockstep {

MtpSpecDrafter::MtpSpecDrafter(Model& target, const SamplingParams& sampling)
    : mtp_(*[&] {
        if (!target.mtp()) fail("--spec mtp: the model has no MTP head (no mtp.* tensors)");
        return target.mtp();
      }()),
      H_(target.config().hidden_size),
      V_(target.config().vocab_size),
      sampler_(sampling),
      seq_(mtp_.new_draft_sequence()) {}

void MtpSpecDrafter::observe_hidden(int64_t first_position, std::span<const float> rows) {
  const size_t end = static_cast<size_t>(first_position) * H_ + rows.size();
  if (target_hidden_.size() < end) target_hidden_.resize(end);
  std::copy(rows.begin(), rows.end(), target_hidden_.begin() + first_position * H_);
}

void MtpSpecDrafter::forget() {
  mtp_.truncate(*seq_, 0);  // the re-run target delivers the hiddens again; slots catch up
  valid_slots_ = 0;
}

std::vector<int32_t> MtpSpecDrafter::propose(std::span<const int32_t> history, int64_t prompt_len,
                                             int k) {
  const int64_t L = static_cast<int64_t>(history.size());
  if (k <= 0 || L < 2) return {};
  if (static_cast<int64_t>(target_hidden_.size()) < (L - 1) * H_)
    fail("mtp drafter: target hidden for position ", L - 2, " was not observed");
  // Drop chained slots, then run true slots valid_slots_..L-2 in one call (teacher-forced
  // catch-up; the last of them is the first draft).
  valid_slots_ = std::min(valid_slots_, L - 2);
  mtp_.truncate(*seq_, valid_slots_);
  const int64_t first = valid_slots_, n = L - 1 - first;
  std::vector<int32_t> context(history.begin(), history.end()), drafts;
  // The backend chooses each draft (only the last slot's token is wanted; the hidden rows still
  // come back, the chain reads them).
  const bool on_backend = backend_sampling_enabled();
  rules_.clear();
  if (on_backend) {
    for (int64_t i = 0; i + 1 < n; ++i) rules_.add_skip();
    rules_.add(sampler_, {context, prompt_len}, V_);
  }
  DraftItem item{seq_.get(), history.subspan(first + 1, n),
                 {target_hidden_.data() + first * H_, static_cast<size_t>(n * H_)},
                 rules_.rules()};
  ForwardResult out = mtp_.draft({&item, 1});
  valid_slots_ = L - 1;

  int64_t row = out.rows - 1;
  for (int i = 0; i < k; ++i) {
    const int32_t d = chosen_token(out, row, sampler_, {context, prompt_len}, V_);
    drafts.push_back(d);
    context.push_back(d);
    if (i + 1 == k) break;
    const std::vector<float> h(out.hidden.begin() + row * H_, out.hidden.begin() + (row + 1) * H_);
    rules_.clear();
    if (on_backend) rules_.add(sampler_, {context, prompt_len}, V_);
    DraftItem chained{seq_.get(), {&context.back(), 1}, h, rules_.rules()};
    out = mtp_.draft({&chained, 1});
    row = 0;
  }
  return drafts;
}

}  // namespace lockstep
