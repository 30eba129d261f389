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

}  // namespace
}  // namespace lockstep
