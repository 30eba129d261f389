// What a hybrid (Gated DeltaNet) model keeps per sequence besides its KV blocks: the conv and
// delta-rule state of every linear-attention layer, plus what truncate() needs to go back.
//
// Rollback keeps the state as it was at SequenceState::rollback_floor and the per-token inputs of
// the recurrent step for the tokens since (pre-conv q|k|v, a, b: conv_dim + 2 nv floats per token
// and layer, about 1/20 of a delta state for Qwen3.5 shapes). truncate(L) restores the floor state
// and replays tokens floor..L-1 through the same per-token step the forward uses, so the result is
// bitwise the state of having fed only those tokens.
//
// Snapshot / restore: `snap = seq.recurrent->clone()` at length L; later
// `seq.recurrent = snap->clone(); model.truncate(seq, L)` (the state knows it reflects L tokens,
// so truncate only trims the KV blocks; the snapshot keeps its own rollback log).
#pragma once

#include <memory>
#include <vector>

#include "models/gated_deltanet_layer.h"
#include "models/model.h"

namespace lockstep {

class HybridState final : public RecurrentState {
 public:
  explicit HybridState(kernels::Backend* be) : be_(be) {}

  int64_t tokens = 0;        // how many tokens `layers` reflects
  int64_t floor_tokens = 0;  // the length `floor` reflects (when there is a log)
  std::vector<DeltaNetState> layers;  // per linear-attention layer, in layer order
  std::vector<DeltaNetState> floor;   // state at rollback_floor; empty when there is no log
  // Per linear layer: [tokens of the last keep_rollback forward][token_inputs], backend memory;
  // the first tokens - floor_tokens rows are the live log (truncate keeps the rest unread).
  std::vector<kernels::Floats> log;

  static std::vector<DeltaNetState> copy_of(const std::vector<DeltaNetState>& src,
                                            kernels::Backend& be) {
    std::vector<DeltaNetState> out;
    out.reserve(src.size());
    for (const DeltaNetState& s : src) out.push_back(s.copy(be));
    return out;
  }

  std::unique_ptr<RecurrentState> clone() const override {
    auto c = std::make_unique<HybridState>(be_);
    c->tokens = tokens;
    c->floor_tokens = floor_tokens;
    c->layers = copy_of(layers, *be_);
    c->floor = copy_of(floor, *be_);
    for (const kernels::Floats& l : log) {
      kernels::Floats copy = be_->array<float>(l.size());
      be_->copy(copy.data(), l.data(), l.size() * sizeof(float));
      c->log.push_back(std::move(copy));
    }
    return c;
  }
  size_t bytes() const override {
    size_t n = 0;
    for (const auto& s : layers) n += (s.conv.size() + s.delta.size()) * sizeof(float);
    for (const auto& s : floor) n += (s.conv.size() + s.delta.size()) * sizeof(float);
    for (const auto& l : log) n += l.size() * sizeof(float);
    return n;
  }

 private:
  kernels::Backend* be_;
};

}  // namespace lockstep
