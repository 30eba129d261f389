// The plumbing of a model family whose only per-sequence state is its KV cache (dense, Gemma 3,
// Gemma 4): the config, the checkpoint (with --quantize's codes), the backend, the KV pool, and
// the Model calls that need nothing else. A family derives from it, loads its weights in its
// constructor and writes forward().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "models/forward_common.h"
#include "models/kv_pool.h"
#include "models/model.h"
#include "models/weights.h"

namespace lockstep {

class KvModel : public Model {
 public:
  const ModelConfig& config() const override { return config_; }
  kernels::Device device() const override { return be_->device(); }
  const KvPool& kv_pool() const override { return kv_; }
  KvPool& kv_pool() override { return kv_; }
  std::unique_ptr<SequenceState> new_sequence() override {
    return std::make_unique<SequenceState>(&kv_);
  }
  void truncate(SequenceState& seq, int64_t length) override { truncate_kv(kv_, seq, length); }

 protected:
  // kv_layers: one pool layer per layer that keeps its own keys and values.
  KvModel(const ModelConfig& c, const std::string& dir, const ModelOptions& o,
          std::unique_ptr<kernels::Backend> backend, std::vector<KvLayerShape> kv_layers)
      : config_(c),
        ckpt_(Checkpoint::open(dir)),
        quantize_(quantize_on_load(*ckpt_, o)),
        be_(std::move(backend)),
        kv_(std::move(kv_layers), o.kv_block_tokens, o.kv_capacity_tokens, be_.get()) {}

  // Every layer alike: num_hidden_layers layers of num_key_value_heads x head_dim.
  static std::vector<KvLayerShape> uniform_kv(const ModelConfig& c) {
    return std::vector<KvLayerShape>(static_cast<size_t>(c.num_hidden_layers),
                                     {c.num_key_value_heads, c.head_dim});
  }

  ModelConfig config_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<QuantizeOnLoad> quantize_;  // --quantize: owns the quantized codes
  std::unique_ptr<kernels::Backend> be_;       // before everything that lives in its memory
  KvPool kv_;
};

}  // namespace lockstep
