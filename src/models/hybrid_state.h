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
  int64_t tokens = 0;        // how many tokens `layers` reflects
  int64_t floor_tokens = 0;  // the length `floor` reflects (when there is a log)
  std::vector<DeltaNetState> layers;  // per linear-attention layer, in layer order
  std::vector<DeltaNetState> floor;   // state at rollback_floor; empty when there is no log
  std::vector<std::vector<float>> log;  // per linear layer: [tokens since floor][token_inputs]

  std::unique_ptr<RecurrentState> clone() const override {
    return std::make_unique<HybridState>(*this);
  }
  size_t bytes() const override {
    size_t n = 0;
    for (const auto& s : layers) n += (s.conv.size() + s.delta.size()) * sizeof(float);
    for (const auto& s : floor) n += (s.conv.size() + s.delta.size()) * sizeof(float);
    for (const auto& l : log) n += l.size() * sizeof(float);
    return n;
  }
};

}  // namespace lockstep
