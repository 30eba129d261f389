// The shipped models (models/, trained by tools/train/) against what transformers measured when
// they were made (models/lockstep-code-16m/eval/reference_loss.json): token ids of the held-out
// sample, mean loss within 1e-3, and the MTP head's argmax tokens, teacher-forced and chained.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "decode/prefill.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace lockstep {
namespace {

const std::string kTarget = std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-16m";
const std::string kDraft = std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-draft-3m";

nlohmann::json reference() {
  std::ifstream in(kTarget + "/eval/reference_loss.json");
  EXPECT_TRUE(in.good()) << "missing " << kTarget << "/eval/reference_loss.json";
  return nlohmann::json::parse(in);
}

double mean_loss(Model& m, const std::vector<int32_t>& ids) {
  auto seq = m.new_sequence();
  const ForwardResult out = prefill(m, *seq, ids, 0, PrefillRows::FinalChunk);
  const int64_t V = m.config().vocab_size;
  double nll = 0;
  for (size_t p = 0; p + 1 < ids.size(); ++p) {
    const float* row = &out.logits[p * V];
    double mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < V; ++i) mx = std::max(mx, double(row[i]));
    for (int64_t i = 0; i < V; ++i) sum += std::exp(double(row[i]) - mx);
    nll -= double(row[ids[p + 1]]) - mx - std::log(sum);
  }
  return nll / double(ids.size() - 1);
}

TEST(ShippedModels, TokenizerMatchesTheReferenceIds) {
  const auto ref = reference();
  std::ifstream in(kTarget + "/eval/heldout_sample.txt", std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  auto tok = Tokenizer::load(kTarget);
  EXPECT_EQ(tok->encode(text.str(), false), ref["ids"].get<std::vector<int32_t>>());
}

TEST(ShippedModels, ScoreMatchesTransformersLoss) {
  const auto ref = reference();
  const std::vector<int32_t> ids = ref["ids"];
  ModelOptions o;
  o.kv_capacity_tokens = 2048;
  auto target = load_model(kTarget, o);
  const double loss = mean_loss(*target, ids);
  EXPECT_NEAR(loss, ref["target_loss_f64"].get<double>(), 1e-3);
  auto draft = load_model(kDraft, o);
  EXPECT_NEAR(mean_loss(*draft, ids), ref["draft_loss_f64"].get<double>(), 1e-3);
  std::printf("[ shipped ] target loss %.7f (transformers f64 %.7f), perplexity %.4f\n", loss,
              ref["target_loss_f64"].get<double>(), std::exp(loss));
}

TEST(ShippedModels, MtpHeadPicksTheReferenceTokens) {
  const auto check = reference()["mtp_check"];
  const std::vector<int32_t> all = reference()["ids"];
  const size_t n = check["n"];
  const std::vector<int32_t> ids(all.begin(), all.begin() + n);
  auto model = load_model(kTarget);
  ASSERT_NE(model->mtp(), nullptr);
  const int64_t V = model->config().vocab_size, H = model->config().hidden_size;
  auto seq = model->new_sequence();
  const ForwardResult out = prefill(*model, *seq, ids, 0, PrefillRows::FinalChunk);
  auto argmax = [&](const float* row) {
    return static_cast<int32_t>(std::max_element(row, row + V) - row);
  };
  std::vector<int32_t> backbone;
  for (size_t p = 0; p < n; ++p) backbone.push_back(argmax(&out.logits[p * V]));
  EXPECT_EQ(backbone, check["backbone_argmax"].get<std::vector<int32_t>>());
  // Teacher-forced slots 0..n-2 in one call.
  MtpDrafter& mtp = *model->mtp();
  auto dseq = mtp.new_draft_sequence();
  DraftItem item{dseq.get(), {ids.data() + 1, n - 1}, {out.hidden.data(), (n - 1) * H}};
  const ForwardResult tf = mtp.draft({&item, 1});
  std::vector<int32_t> tf_argmax;
  for (size_t p = 0; p + 1 < n; ++p) tf_argmax.push_back(argmax(&tf.logits[p * V]));
  EXPECT_EQ(tf_argmax, check["teacher_forced_argmax"].get<std::vector<int32_t>>());
  // Chained: slot n-1 from the backbone's last hidden, then from the head's own hidden.
  const std::vector<int32_t> chained_in = check["chained_tokens_in"];
  std::vector<float> h(out.hidden.end() - H, out.hidden.end());
  std::vector<int32_t> chained;
  for (int32_t t : chained_in) {
    DraftItem step{dseq.get(), {&t, 1}, h};
    const ForwardResult r = mtp.draft({&step, 1});
    chained.push_back(argmax(r.logits.data()));
    h.assign(r.hidden.begin(), r.hidden.end());
  }
  EXPECT_EQ(chained, check["chained_argmax"].get<std::vector<int32_t>>());
}

}  // namespace
}  // namespace lockstep
