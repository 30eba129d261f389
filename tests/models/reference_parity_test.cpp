// Reference parity: lockstep's logits against float64 transformers logits for every committed
// fixture (tests/fixtures/<name>/reference.json, made by tools/reference/ on a GPU machine).
// Each prompt is read whole and one token at a time; both must match the reference within
// 1e-4 of the largest |logit| at every position (F32 and BF16 weights alike: the reference for a
// BF16 fixture is computed from the same BF16 weights, so only activation rounding differs).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/model.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  const fs::path root = fs::path(LOCKSTEP_SOURCE_DIR) / "tests" / "fixtures";
  if (fs::exists(root))
    for (const auto& e : fs::directory_iterator(root))
      if (fs::exists(e.path() / "reference.json")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

struct Worst {
  double rel = 0;
  size_t position = 0;
};

Worst compare(const std::vector<float>& got, const nlohmann::json& want, int64_t V) {
  Worst w;
  for (size_t p = 0; p < want.size(); ++p) {
    double scale = 0, err = 0;
    for (int64_t i = 0; i < V; ++i) scale = std::max(scale, std::fabs(want[p][i].get<double>()));
    for (int64_t i = 0; i < V; ++i)
      err = std::max(err, std::fabs(got[p * V + i] - want[p][i].get<double>()));
    if (err / scale > w.rel) w = {err / scale, p};
  }
  return w;
}

class ReferenceParity : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceParity, LogitsMatchTransformers) {
  const fs::path dir = fs::path(LOCKSTEP_SOURCE_DIR) / "tests" / "fixtures" / GetParam();
  nlohmann::json ref;
  std::ifstream(dir / "reference.json") >> ref;
  const std::vector<int32_t> ids = ref["ids"];
  auto model = load_model(dir.string());
  const int64_t V = model->config().vocab_size;
  ASSERT_EQ(ref["logits"].size(), ids.size());
  ASSERT_EQ(static_cast<int64_t>(ref["logits"][0].size()), V);

  auto whole_seq = model->new_sequence();
  ForwardItem whole{whole_seq.get(), ids, ForwardItem::Logits::All};
  const auto r = model->forward({&whole, 1});
  const Worst w = compare(r.logits, ref["logits"], V);
  EXPECT_LT(w.rel, 1e-4) << GetParam() << " whole prompt: worst at position " << w.position;

  auto seq = model->new_sequence();
  std::vector<float> stepwise;
  for (int32_t id : ids) {
    ForwardItem it{seq.get(), {&id, 1}, ForwardItem::Logits::Last};
    const auto s = model->forward({&it, 1});
    stepwise.insert(stepwise.end(), s.logits.begin(), s.logits.end());
  }
  EXPECT_EQ(stepwise, r.logits) << "token-at-a-time logits differ from whole-prompt logits";
  std::printf("[ parity ] %-24s worst |diff| / max|logit| = %.3g (position %zu)\n",
              GetParam().c_str(), w.rel, w.position);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ReferenceParity, ::testing::ValuesIn(fixture_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(ReferenceParity, FixturesArePresent) {
  // The parity suite must never pass by finding nothing to compare.
  EXPECT_GE(fixture_names().size(), 4u) << "tests/fixtures/*/reference.json missing";
}

}  // namespace
}  // namespace lockstep
