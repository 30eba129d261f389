// The parts of a forward call every model family shares: flattening items into rows, reserving
// KV blocks, rotary tables, and turning the final hidden states into the requested outputs.
#pragma once

#include <span>
#include <vector>

#include "kernels/rope_table.h"
#include "models/attention_layer.h"
#include "models/model.h"

namespace lockstep {

struct FlatBatch {
  std::vector<int32_t> tokens;  // all items' tokens, in order
  BatchRows rows;
  std::vector<int64_t> item_first;  // per item: first row
};

// Validates items, reserves KV blocks for every new position, and fills positions, block tables
// and cos/sin for all rows.
FlatBatch flatten_batch(std::span<const ForwardItem> items, KvPool& pool,
                        const kernels::RopeTable& rope, int64_t max_positions);

// Final norm and lm_head on the rows the items asked for; advances each sequence's length.
struct OutputHead {
  const std::vector<float>* final_norm;
  kernels::Weight lm_head;
  float eps;
  bool zero_centered;
};
ForwardResult finish_forward(std::span<const ForwardItem> items, const FlatBatch& batch,
                             const std::vector<float>& x, int64_t hidden, const OutputHead& head,
                             ThreadPool& threads);

}  // namespace lockstep
