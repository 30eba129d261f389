// The bench's workload model: with --quantize, the bandwidth floor is the quantized weights'.
#include <gtest/gtest.h>

#include "decode/bench.h"
#include "io/safetensors.h"
#include "models/config.h"
#include "../models/model_test_util.h"

namespace lockstep {
namespace {

TEST(BenchWorkload, QuantizeCountsCodesAndGroupPairsOfTheMatrices) {
  const std::string dir = test::tiny_checkpoint("tiny-qwen3", DType::BF16);
  const ModelConfig c = load_model_config(dir);
  const Workload plain = workload_of(dir, c, 4);
  // The expected bytes, tensor by tensor: float ".weight" matrices whose rows split into groups
  // of 32 become 4-bit codes plus a 16-bit scale and bias per group; the rest stay as stored.
  auto ckpt = Checkpoint::open(dir);
  const bool untied = ckpt->has("lm_head.weight");
  double expect = 0, matrices = 0;
  for (const std::string& name : ckpt->names()) {
    const TensorInfo* t = ckpt->find(name);
    if (untied && name.find("embed_tokens.") != std::string::npos) continue;
    if (t->shape.size() == 2 && t->shape[1] % 32 == 0) {
      expect += static_cast<double>(t->numel()) / 2 + static_cast<double>(t->shape[0]) *
                                                          static_cast<double>(t->shape[1] / 32) * 4;
      ++matrices;
    } else {
      expect += static_cast<double>(t->nbytes);
    }
  }
  ASSERT_GT(matrices, 0);
  const Workload q4 = workload_of(dir, c, 4, 4, 32);
  EXPECT_DOUBLE_EQ(q4.weight_bytes, expect);
  EXPECT_LT(q4.weight_bytes, plain.weight_bytes * 0.5);  // BF16 -> 4.5 bits a weight
  EXPECT_EQ(q4.linear_params, plain.linear_params);      // the FLOPs do not change
  EXPECT_GT(workload_of(dir, c, 4, 8, 32).weight_bytes, q4.weight_bytes);
}

// A batched step of a mixture of experts reads the experts any of its tokens routes to: counted at
// the share uniform routing would give, k / E for one token, approaching all of them.
TEST(BenchWorkload, BatchedStepCountsTheRoutedExpertsItsTokensReach) {
  const std::string dir = test::tiny_checkpoint("tiny-qwen3-moe", DType::BF16);
  const ModelConfig c = load_model_config(dir);
  ASSERT_GT(c.num_experts, c.num_experts_per_tok);
  const Workload w = workload_of(dir, c, 4);
  const double k_over_e =
      static_cast<double>(c.num_experts_per_tok) / static_cast<double>(c.num_experts);
  auto ckpt = Checkpoint::open(dir);
  double routed = 0;
  for (const std::string& name : ckpt->names())
    if (is_routed_expert_tensor(name)) routed += static_cast<double>(ckpt->find(name)->nbytes);
  ASSERT_GT(routed, 0);
  EXPECT_DOUBLE_EQ(w.routed_bytes, routed);
  EXPECT_DOUBLE_EQ(w.routed_share, k_over_e);
  EXPECT_DOUBLE_EQ(w.batch_routed_share(1), k_over_e);
  EXPECT_DOUBLE_EQ(w.batch_routed_share(2), 1 - (1 - k_over_e) * (1 - k_over_e));
  EXPECT_NEAR(w.batch_decode_bytes(100, 1), w.decode_bytes(100), 1e-6 * w.decode_bytes(100));
  // 64 tokens: the weights read once with nearly every expert, plus 64 sequences' KV.
  const double b64 = w.batch_decode_bytes(100, 64);
  const double all_experts = w.weight_bytes + (1 - k_over_e) * routed;
  EXPECT_GT(b64, w.weight_bytes + 64 * w.kv_bytes_per_pos * 100);
  EXPECT_LE(b64, all_experts + 64 * w.kv_bytes_per_pos * 100 + 1);

  // A dense model: no routed bytes, the weights once whatever the batch.
  const std::string dense = test::tiny_checkpoint("tiny-qwen3", DType::BF16);
  const Workload d = workload_of(dense, load_model_config(dense), 4);
  EXPECT_EQ(d.routed_bytes, 0);
  EXPECT_DOUBLE_EQ(d.batch_routed_share(64), 1);
  EXPECT_DOUBLE_EQ(d.batch_decode_bytes(10, 8), d.weight_bytes + 8 * d.kv_bytes_per_pos * 10);
}

}  // namespace
}  // namespace lockstep
