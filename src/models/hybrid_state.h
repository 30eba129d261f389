// What a hybrid (Gated DeltaNet) model keeps per sequence besides its KV blocks: the conv and
// delta-rule state of every linear-attention layer, plus what truncate() needs to go back.
//
// Rollback keeps the state as it was at SequenceState::rollback_floor and the per-token inputs of
// the recurrent step for the tokens since (pre-conv q|k|v, a, b: conv_dim + 2 nv floats per token
// and layer, about 1/20 of a delta state for Qwen3.5 shapes). truncate(L) restores the floor state
// and replays tokens floor..L-1 through the same per-token step the forward uses, so the result is
// bitwise the state of having fed only those tokens.
//
// The floor and log live in buffers a sequence keeps once it has made a keep_rollback forward
// (reserve_rollback sizes them before the forward's step begins); the forward copies into them
// (Backend::copy_spans, the addresses in a table uploaded with the step), so a verify block
// allocates nothing that outlives its step and can be replayed from a CUDA graph.
//
// Snapshot / restore: `snap = seq.recurrent->clone()` at length L; later
// `seq.recurrent = snap->clone(); model.truncate(seq, L)` (the state knows it reflects L tokens,
// so truncate only trims the KV blocks; the snapshot keeps its own rollback log).
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "models/gated_deltanet_layer.h"
#include "models/model.h"

namespace lockstep {

class HybridState final : public RecurrentState {
 public:
  explicit HybridState(kernels::Backend* be) : be_(be) {}

  int64_t tokens = 0;        // how many tokens `layers` reflects
  int64_t floor_tokens = 0;  // the length `floor` reflects (when has_floor)
  bool has_floor = false;    // floor and log hold the last keep_rollback forward's data
  std::vector<DeltaNetState> layers;  // per linear-attention layer, in layer order
  // Rollback buffers (reserve_rollback), kept for the sequence's life once made; what they hold
  // means something only while has_floor. floor: per linear layer, the state at rollback_floor.
  std::vector<DeltaNetState> floor;
  // Per linear layer: [log_rows][token_inputs], backend memory; the first tokens - floor_tokens
  // rows are the live log (truncate keeps the rest unread).
  std::vector<kernels::Floats> log;
  int64_t log_rows = 0;

  // Makes floor and log able to hold a keep_rollback forward of n tokens. It allocates, so it
  // runs before the forward's step begins (an array allocated inside a recorded step dies with
  // it). A grown log keeps its rows: a forward that then fails validation leaves truncate working.
  void reserve_rollback(const DeltaNetDims& d, int64_t n) {
    if (floor.size() != layers.size()) {
      floor.clear();
      for (const DeltaNetState& s : layers) {
        DeltaNetState f;
        f.conv = be_->array<float>(s.conv.size());
        f.delta = be_->array<float>(s.delta.size());
        floor.push_back(std::move(f));
      }
    }
    if (n <= log_rows && log.size() == layers.size()) return;
    const int64_t rows = std::max(n, log_rows), TI = d.token_inputs();
    std::vector<kernels::Floats> grown;
    for (size_t l = 0; l < layers.size(); ++l) {
      grown.push_back(be_->array<float>(rows * TI));
      if (l < log.size() && log_rows > 0)
        be_->copy(grown.back().data(), log[l].data(), log_rows * TI * sizeof(float));
    }
    log = std::move(grown);
    log_rows = rows;
  }

  static std::vector<DeltaNetState> copy_of(const std::vector<DeltaNetState>& src,
                                            kernels::Backend& be) {
    std::vector<DeltaNetState> out;
    out.reserve(src.size());
    for (const DeltaNetState& s : src) out.push_back(s.copy(be));
    return out;
  }

  // The copy gets rollback buffers only when this state's mean something.
  std::unique_ptr<RecurrentState> clone() const override {
    auto c = std::make_unique<HybridState>(be_);
    c->tokens = tokens;
    c->floor_tokens = floor_tokens;
    c->has_floor = has_floor;
    c->layers = copy_of(layers, *be_);
    if (!has_floor) return c;
    c->floor = copy_of(floor, *be_);
    for (const kernels::Floats& l : log) {
      kernels::Floats copy = be_->array<float>(l.size());
      be_->copy(copy.data(), l.data(), l.size() * sizeof(float));
      c->log.push_back(std::move(copy));
    }
    c->log_rows = log_rows;
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
