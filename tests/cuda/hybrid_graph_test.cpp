// Hybrid verify blocks under CUDA graphs. copy_spans copies exactly what the host memcpy copies,
// whatever the alignment of its ends. A hybrid model's verify blocks (keep_rollback), recorded
// once and then replayed while other sequences take the call's slots (so the graph copies into
// other rollback buffers than it was recorded with), give bitwise the logits and, after every
// truncate, the recurrent states of the same calls run eagerly (LOCKSTEP_CUDA_GRAPHS=0).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../models/model_test_util.h"
#include "cuda_test_util.h"
#include "kernels/backend.h"
#include "models/hybrid_state.h"
#include "models/model.h"

namespace lockstep::kernels::cuda::test {
namespace {

TEST_F(CudaTest, CopySpansIsMemcpyAtAnyAlignment) {
  const size_t n = size_t{3} << 20;
  std::vector<uint8_t> src(n), host(n, 0);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  DeviceBuffer<uint8_t> dsrc(src), ddst(std::vector<uint8_t>(n, 0));
  // (dst offset, src offset, bytes): 16-byte words, 4-byte words, bytes; over a block's 16 KiB.
  const std::vector<std::array<int64_t, 3>> cuts = {
      {0, 0, 1 << 20}, {1 << 20, 64, 16 * 1024 + 16}, {(1 << 20) + 65536, 4, 40004},
      {(1 << 20) + 131072, 3, 17}, {(1 << 20) + 200001, 1000, 70001}, {2 << 20, 0, 0}};
  std::vector<CopySpan> spans;
  int64_t most = 0;
  for (const auto& c : cuts) {
    spans.push_back({ddst.get() + c[0], dsrc.get() + c[1], c[2]});
    std::memcpy(host.data() + c[0], src.data() + c[1], static_cast<size_t>(c[2]));
    most = std::max(most, c[2]);
  }
  DeviceBuffer<CopySpan> dspans(spans);
  copy_spans(dspans.get(), static_cast<int64_t>(spans.size()), most);
  EXPECT_EQ(ddst.to_host(), host);
}

// The recurrent state of a sequence (every layer's conv and delta state), from the device.
std::vector<float> state_of(const SequenceState& s) {
  std::vector<float> out;
  for (const DeltaNetState& l : dynamic_cast<const HybridState&>(*s.recurrent).layers)
    for (const Floats* a : {&l.conv, &l.delta}) {
      const size_t at = out.size();
      out.resize(at + static_cast<size_t>(a->size()));
      download(out.data() + at, a->data(), static_cast<size_t>(a->size()) * sizeof(float));
    }
  return out;
}

// Three sequences' prompts, then rounds of verify blocks of two of them in one call (the pair and
// its order change every round) and a truncate of each to some of its block: every call's logits
// and every truncated state, in order.
std::vector<std::vector<float>> run_script(Model& m) {
  const int V = static_cast<int>(m.config().vocab_size);
  std::vector<std::vector<float>> out;
  std::unique_ptr<SequenceState> seqs[3];
  for (int s = 0; s < 3; ++s) {
    seqs[s] = m.new_sequence();
    const auto prompt = lockstep::test::random_ids(13 + 4 * s, V, 70 + s);
    ForwardItem it{seqs[s].get(), prompt, ForwardItem::Logits::Last};
    out.push_back(m.forward({&it, 1}).logits);
  }
  const int pairs[8][2] = {{0, 1}, {1, 0}, {2, 1}, {0, 2}, {1, 2}, {2, 0}, {0, 1}, {1, 0}};
  for (int round = 0; round < 8; ++round) {
    const int a = pairs[round][0], b = pairs[round][1];
    const std::vector<int32_t> block[2] = {lockstep::test::random_ids(4, V, 100 + 2 * round),
                                           lockstep::test::random_ids(4, V, 101 + 2 * round)};
    ForwardItem items[2] = {{seqs[a].get(), block[0], ForwardItem::Logits::All, true},
                            {seqs[b].get(), block[1], ForwardItem::Logits::All, true}};
    out.push_back(m.forward(items).logits);
    const int keep[2] = {round % 5, (round * 3 + 1) % 5};
    const int who[2] = {a, b};
    for (int k = 0; k < 2; ++k) {
      SequenceState& s = *seqs[who[k]];
      m.truncate(s, s.rollback_floor + keep[k]);
      out.push_back(state_of(s));
    }
  }
  return out;
}

// The shipped target (a Qwen3.5 hybrid with GPU-sized heads): from the working directory (the GPU
// machine runs the packed tests from the repo root), else from the source tree.
std::string shipped_target() {
  for (const std::string& base : {std::string("."), std::string(LOCKSTEP_SOURCE_DIR)}) {
    const std::string dir = base + "/models/lockstep-code-16m";
    if (std::filesystem::exists(dir + "/config.json")) return dir;
  }
  return "";
}

TEST_F(CudaTest, HybridVerifyBlocksReplayBitwiseWithOtherSequencesInTheirSlots) {
  const std::string dir = shipped_target();
  ASSERT_FALSE(dir.empty()) << "models/lockstep-code-16m not found";
  ModelOptions o;
  o.device = Device::Cuda;
  setenv("LOCKSTEP_CUDA_GRAPHS", "0", 1);
  auto eager = load_model(dir, o);
  unsetenv("LOCKSTEP_CUDA_GRAPHS");
  auto graphs = load_model(dir, o);
  const auto want = run_script(*eager), got = run_script(*graphs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].size(), got[i].size()) << "output " << i;
    size_t differ = 0;
    for (size_t k = 0; k < want[i].size(); ++k)
      differ += std::memcmp(&want[i][k], &got[i][k], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << "output " << i << " (" << want[i].size() << " floats)";
  }
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
