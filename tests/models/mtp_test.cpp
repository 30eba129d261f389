// The MTP head against tools/reference/mtp_reference.py (float64, tests/fixtures/<name>/
// mtp_reference.json): teacher-forced slots fed from the reference's backbone hidden states, then
// three chained draft steps; and, without a reference, that all slots in one call, one slot per
// call and slots batched beside another draft sequence give the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "models/model.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

double rel_error(const float* got, const nlohmann::json& want) {
  double scale = 0, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i].get<double>()));
    err = std::max(err, std::fabs(got[i] - want[i].get<double>()));
  }
  return err / scale;
}

std::vector<float> to_floats(const nlohmann::json& rows) {
  std::vector<float> v;
  for (const auto& r : rows)
    for (const auto& x : r) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

class MtpParity : public ::testing::TestWithParam<std::string> {};

TEST_P(MtpParity, DraftsMatchFloat64Reference) {
  const fs::path dir = fs::path(LOCKSTEP_SOURCE_DIR) / "tests" / "fixtures" / GetParam();
  nlohmann::json ref;
  std::ifstream(dir / "mtp_reference.json") >> ref;
  auto model = load_model(dir.string());
  MtpDrafter* mtp = model->mtp();
  ASSERT_NE(mtp, nullptr);
  const int64_t H = model->config().hidden_size, V = model->config().vocab_size;
  const auto& tf = ref["teacher_forced"];
  const std::vector<int32_t> tokens = tf["tokens"];
  const int64_t n = static_cast<int64_t>(tokens.size());
  const std::vector<float> hidden = to_floats(ref["backbone_hidden"]);

  // Teacher-forced: slot p takes backbone_hidden[p] and ids[p + 1].
  auto seq = mtp->new_draft_sequence();
  DraftItem item{seq.get(), tokens, {hidden.data(), static_cast<size_t>(n * H)}};
  const ForwardResult r = mtp->draft({&item, 1});
  ASSERT_EQ(r.rows, n);
  double worst_logits = 0, worst_hidden = 0;
  for (int64_t p = 0; p < n; ++p) {
    worst_logits = std::max(worst_logits, rel_error(&r.logits[p * V], tf["logits"][p]));
    worst_hidden = std::max(worst_hidden, rel_error(&r.hidden[p * H], tf["hidden"][p]));
  }
  EXPECT_LT(worst_logits, 1e-4);
  EXPECT_LT(worst_hidden, 1e-4);

  // Chained: step 1 takes the backbone's last hidden, later steps the previous step's output.
  std::vector<float> h(hidden.end() - H, hidden.end());
  double worst_chained = 0;
  for (const auto& step : ref["chained"]) {
    ASSERT_EQ(seq->length, step["slot"].get<int64_t>());
    const int32_t token = step["token"];
    DraftItem one{seq.get(), {&token, 1}, h};
    const ForwardResult s = mtp->draft({&one, 1});
    worst_chained = std::max(worst_chained, rel_error(s.logits.data(), step["logits"]));
    worst_chained = std::max(worst_chained, rel_error(s.hidden.data(), step["hidden"]));
    h = s.hidden;
  }
  EXPECT_LT(worst_chained, 1e-4);

  // The backbone's own hidden states drive the head as well as the reference's do.
  auto bseq = model->new_sequence();
  const std::vector<int32_t> ids = ref["ids"];
  ForwardItem all{bseq.get(), ids, ForwardItem::Logits::All};
  const ForwardResult b = model->forward({&all, 1});
  double worst_backbone = 0;
  for (int64_t i = 0; i < b.rows * H; ++i)
    worst_backbone = std::max(worst_backbone, static_cast<double>(std::fabs(b.hidden[i] - hidden[i])));
  EXPECT_LT(worst_backbone, 1e-4);
  std::printf("[ mtp    ] %-20s teacher-forced logits %.3g hidden %.3g, chained %.3g, "
              "backbone hidden |diff| %.3g\n",
              GetParam().c_str(), worst_logits, worst_hidden, worst_chained, worst_backbone);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MtpParity,
                         ::testing::Values("qwen35-f32", "qwen35-wrapped-bf16", "qwen35moe-f32",
                                           "qwen35moe-wrapped-bf16"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(Mtp, SlotsInOneCallOneAtATimeAndBatchedAgree) {
  ThreadPool two(2);
  ModelOptions o;
  o.pool = &two;
  o.kv_block_tokens = 5;
  auto model = load_model(test::tiny_checkpoint("tiny-qwen3.5"), o);
  MtpDrafter* mtp = model->mtp();
  ASSERT_NE(mtp, nullptr);
  const size_t H = static_cast<size_t>(model->config().hidden_size);
  std::vector<int32_t> ids(23);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37 + 11) % 512);
  auto seq = model->new_sequence();
  ForwardItem all{seq.get(), ids, ForwardItem::Logits::All};
  const ForwardResult b = model->forward({&all, 1});
  const std::span<const int32_t> next(ids.data() + 1, ids.size() - 1);
  const size_t n = next.size();

  auto whole = mtp->new_draft_sequence();
  DraftItem w{whole.get(), next, {b.hidden.data(), n * H}};
  const ForwardResult rw = mtp->draft({&w, 1});

  // One slot per call, beside a second draft sequence that runs its own slots.
  auto single = mtp->new_draft_sequence(), other = mtp->new_draft_sequence();
  std::vector<float> logits, hidden;
  for (size_t p = 0; p < n; ++p) {
    DraftItem items[2] = {{other.get(), {ids.data(), 2}, {b.hidden.data() + 3 * H, 2 * H}},
                          {single.get(), next.subspan(p, 1), {b.hidden.data() + p * H, H}}};
    const ForwardResult r = mtp->draft(items);
    logits.insert(logits.end(), r.logits.begin() + r.first_row[1] * (r.logits.size() / r.rows),
                  r.logits.end());
    hidden.insert(hidden.end(), r.hidden.begin() + r.first_row[1] * H, r.hidden.end());
  }
  EXPECT_EQ(logits, rw.logits);
  EXPECT_EQ(hidden, rw.hidden);

  // Truncate and redo the last 5 slots: same bits again (a rejected chained draft).
  mtp->truncate(*single, n - 5);
  DraftItem redo{single.get(), next.subspan(n - 5), {b.hidden.data() + (n - 5) * H, 5 * H}};
  const ForwardResult rr = mtp->draft({&redo, 1});
  EXPECT_EQ(0, std::memcmp(rr.hidden.data(), &rw.hidden[(n - 5) * H], 5 * H * 4));
}

TEST(Mtp, AbsentWithoutMtpTensors) {
  auto model = load_model(std::string(LOCKSTEP_SOURCE_DIR) + "/tests/fixtures/qwen35-tied-f32");
  EXPECT_EQ(model->mtp(), nullptr);
}

}  // namespace
}  // namespace lockstep
