// lockstep bench: prefill and decode speed of a checkpoint, against this machine's measured peaks.
//
// Each repetition starts a fresh sequence, prefills `prompt_tokens` seeded random ids in one
// forward and then decodes `gen_tokens` tokens one forward each (or in speculative rounds with a
// drafter), through generate() like a real request. The workload model (bytes read and FLOPs per
// token) comes from the checkpoint's tensors and config, so the figures can be compared with the
// bandwidth floor and the FMA peak.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "constraints/constraint.h"
#include "decode/speculative/drafter.h"
#include "models/model.h"

namespace lockstep {

// What one token costs, from the checkpoint (weights read once per forward) and the config.
struct Workload {
  double weight_bytes = 0;      // weights read by one forward (lm_head included, MTP excluded)
  double linear_params = 0;     // weights that take part in matrix products (2 FLOPs each per row)
  double head_params = 0;       // of which the lm_head's: a prefill runs it for its last row only
  double kv_bytes_per_pos = 0;  // KV bytes read per token per context position (full attention)
  double attn_flops_per_pos = 0;  // attention FLOPs per token per context position
  double state_bytes = 0;       // recurrent state read per token (Gated DeltaNet)
  double state_flops = 0;
  // A mixture of experts: every routed expert's bytes (weight_bytes holds routed_share of them,
  // the k / E of E experts that one decode token reads). 0 for a dense model.
  double routed_bytes = 0;
  double routed_share = 1;

  // Bytes one decode forward reads at context length `ctx`, and the FLOPs it does.
  double decode_bytes(double ctx) const { return weight_bytes + kv_bytes_per_pos * ctx + state_bytes; }
  // The share of a layer's routed experts that `batch` tokens read together, if routing were
  // uniform: each token picks k of E, so an expert is missed by all of them with probability
  // (1 - k / E)^batch. k / E at batch 1; 1 for a dense model. Real routing is skewed (fewer
  // distinct experts), so for a trained model this overstates the bytes of a large batch.
  double batch_routed_share(double batch) const {
    if (routed_bytes <= 0) return 1;
    return 1 - std::pow(1 - routed_share, batch);
  }
  // Bytes one decode step of `batch` sequences reads: the weights once (a mixture of experts'
  // routed experts at batch_routed_share), each sequence's KV and state.
  double batch_decode_bytes(double ctx, double batch) const {
    const double routed = routed_bytes * (batch_routed_share(batch) - routed_share);
    return weight_bytes + routed + batch * (kv_bytes_per_pos * ctx + state_bytes);
  }
  double token_flops(double ctx) const {
    return 2 * linear_params + attn_flops_per_pos * ctx + state_flops;
  }
  // FLOPs of a p-token prefill from an empty cache that asks for the last row's logits only.
  double prefill_flops(double p) const {
    return p * (token_flops((p + 1) / 2) - 2 * head_params) + 2 * head_params;
  }
};
// A mixture of experts counts its routed experts at k / E of their bytes (and parameters): the
// active bytes a batch-1 decode token reads (router, shared expert, attention, lm_head in full).
// kv_elem_bytes: bytes of one cached key or value element (the model's KvPool dtype: 4 on the
// CPU, 2 on CUDA). quantize_bits (4 or 8; 0: none): the float matrices are counted as --quantize
// stores them (codes plus a 16-bit scale and bias per group of quantize_group_size), so the floor
// is the quantized weights' (the GPU keeps them quantized unless LOCKSTEP_CUDA_QUANT=0).
Workload workload_of(const std::string& dir, const ModelConfig& config, int64_t kv_elem_bytes,
                     int quantize_bits = 0, int64_t quantize_group_size = 64);

// A routed expert's tensor (mlp.experts.*, mlp.switch_mlp.*): what a decode token reads k / E of.
bool is_routed_expert_tensor(const std::string& name);

struct BenchOptions {
  int64_t prompt_tokens = 512, gen_tokens = 128;
  int repetitions = 3;  // timed, after one untimed warm-up
  uint64_t seed = 1;
  Drafter* drafter = nullptr;  // speculative decoding (the tokens are the same; only speed moves)
  int draft_width = 0;
  // Constrained decoding (each repetition a new request of the same compiled constraint, so the
  // warm-up fills its shared token cache). A run ends early where the grammar ends.
  std::shared_ptr<const constraints::Constraint> constraint;
};

struct BenchRun {
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t decoded = 0;  // tokens produced by decode forwards
};

std::vector<BenchRun> run_bench(Model& model, const BenchOptions& options);

// lockstep bench --batch N: the serving engine's batched decode step without HTTP. Each
// repetition prefills `batch` sequences of `prompt_tokens` seeded random ids (one sequence at a
// time, in chunks of prefill_chunk), then runs `gen_tokens` steps, each one model.forward of
// `batch` one-token items built by SequenceDecoder::next_item and consumed by
// SequenceDecoder::consume, as Engine::loop runs a decode step (token choice included).
struct BatchBenchOptions {
  int64_t batch = 1, prompt_tokens = 512, gen_tokens = 128;
  int64_t prefill_chunk = 512;
  int repetitions = 3;  // timed, after one untimed warm-up
  uint64_t seed = 1;
};

struct BatchBenchRun {
  double prefill_seconds = 0;         // all sequences' prompts
  std::vector<double> step_seconds;   // one per decode step: next_item, forward, consume
};

std::vector<BatchBenchRun> run_batch_bench(Model& model, const BatchBenchOptions& options);

// Median and spread of a sample (spread = (max - min) / median).
struct Summary {
  double median = 0, min = 0, max = 0;
  double spread() const { return median > 0 ? (max - min) / median : 0; }
};
Summary summarize(std::vector<double> values);

}  // namespace lockstep
