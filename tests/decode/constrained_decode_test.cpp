// Constrained decoding on the shipped model (a real tokenizer): the output satisfies its JSON
// schema or regular expression at temperature 0 and seeded 0.8; the generation gate under a
// constraint finds no divergence with chunking, batching and lookup / draft-model / MTP
// speculation; a drafted token the mask forbids is rejected and changes nothing; the grammar's end
// stops the output with or without EOS ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>

#include "decode/constraint_tracker.h"
#include "decode/constraint_vocab.h"
#include "decode/prefill.h"
#include "decode/verify_gate.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace lockstep {
namespace {

using constraints::Constraint;
using constraints::ConstraintSpec;

const std::string kTarget = std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-16m";
const std::string kDraft = std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-draft-3m";

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 10},
    "kind": {"enum": ["function", "class", "variable"]},
    "lines": {"type": "integer", "minimum": 1, "maximum": 400}
  },
  "required": ["name", "kind", "lines"],
  "additionalProperties": false
})";

struct Shipped {
  std::unique_ptr<Tokenizer> tok = Tokenizer::load(kTarget);
  std::unique_ptr<Model> model = load_model(kTarget);
  std::vector<int32_t> eos = model->config().eos_token_ids;

  std::shared_ptr<const Constraint> compile(const ConstraintSpec& spec, bool with_eos = true) {
    const std::vector<int32_t> none;
    return Constraint::compile(
        spec, token_vocabulary(*tok, with_eos ? eos : none, model->config().vocab_size));
  }
  std::vector<int32_t> prompt(const std::string& text) { return tok->encode(text, true); }
  GenerateOptions options(std::shared_ptr<const Constraint> c, float temp, int64_t n) {
    GenerateOptions o;
    o.max_tokens = n;
    o.eos_ids = eos;
    o.sampling.temperature = temp;
    o.sampling.seed = 99;
    o.constraint = std::move(c);
    return o;
  }
};

Shipped& shipped() {
  static Shipped s;
  return s;
}

const std::vector<std::string> kPrompts = {
    "def parse_config(path):\n    \"\"\"Read the file and return",
    "// A small linked list in C++\nstruct Node {",
    "The answer, as JSON:",
};

TEST(ConstrainedDecode, JsonSchemaOutputParsesAndSatisfiesTheSchema) {
  Shipped& s = shipped();
  const auto c = s.compile(ConstraintSpec::json_schema(kSchema));
  for (const std::string& p : kPrompts)
    for (float temp : {0.0f, 0.8f}) {
      const GenerateResult r = generate(*s.model, s.prompt(p), s.options(c, temp, 120));
      const std::string text = s.tok->decode(r.tokens, true);
      SCOPED_TRACE(p + " / temp " + std::to_string(temp) + ": " + text);
      ASSERT_EQ(r.finish_reason, "stop");
      EXPECT_EQ(check_constraint(*c, r.tokens), ConstraintCheck::kComplete);
      const auto j = nlohmann::json::parse(text);  // throws (fails the test) if not JSON
      ASSERT_TRUE(j.is_object());
      EXPECT_EQ(j.size(), 3u);
      ASSERT_TRUE(j["name"].is_string());
      EXPECT_LE(j["name"].get<std::string>().size(), 10u * 4);  // code points <= 10
      const std::string kind = j["kind"].get<std::string>();
      EXPECT_TRUE(kind == "function" || kind == "class" || kind == "variable") << kind;
      ASSERT_TRUE(j["lines"].is_number_integer());
      EXPECT_GE(j["lines"].get<int64_t>(), 1);
      EXPECT_LE(j["lines"].get<int64_t>(), 400);
    }
}

TEST(ConstrainedDecode, RegexOutputMatchesThePattern) {
  Shipped& s = shipped();
  const std::string pattern = "[a-z_]{2,12}\\((0|[1-9][0-9]{0,2})(, (0|[1-9][0-9]{0,2})){0,2}\\)";
  const auto c = s.compile(ConstraintSpec::regex(pattern));
  for (const std::string& p : kPrompts)
    for (float temp : {0.0f, 0.8f}) {
      const GenerateResult r = generate(*s.model, s.prompt(p), s.options(c, temp, 64));
      const std::string text = s.tok->decode(r.tokens, true);
      EXPECT_EQ(r.finish_reason, "stop") << text;
      EXPECT_TRUE(std::regex_match(text, std::regex(pattern))) << "\"" << text << "\"";
    }
}

TEST(ConstrainedDecode, GateFindsNoDivergenceUnderAConstraint) {
  Shipped& s = shipped();
  auto draft = load_model(kDraft);
  // Two prompts and two widths per mode keep this to seconds; tests/cli/constraints.sh runs
  // `lockstep verify --json-schema` with every width.
  for (const ConstraintSpec& spec : {ConstraintSpec::json_schema(kSchema)}) {
    GateConfig cfg;
    for (size_t i = 0; i < 2; ++i) cfg.prompts.push_back(s.prompt(kPrompts[i]));
    cfg.max_tokens = 20;
    cfg.eos_ids = s.eos;
    cfg.lookup_widths = {1, 4};
    cfg.draft_widths = {1, 3};
    cfg.mtp_widths = {1, 2};
    cfg.draft_model = draft.get();
    cfg.constraint = s.compile(spec);
    ASSERT_NE(s.model->mtp(), nullptr) << "the shipped target has an MTP head";
    const GateReport r = run_gate(*s.model, cfg);
    EXPECT_EQ(r.cases.size(), 2u * 2u * (1 + 1 + 2 + 2 + 2));
    EXPECT_EQ(r.diverged(), 0u);
    EXPECT_EQ(r.constraint_invalid, 0u);
    EXPECT_EQ(r.constraint_complete + r.constraint_incomplete, 2u * 2u);
    // Speculation must have proposed and had tokens rejected, or verification went untested.
    int64_t drafted = 0, accepted = 0;
    for (const auto& c : r.cases) {
      drafted += c.spec.drafted;
      accepted += c.spec.accepted;
    }
    EXPECT_GT(accepted, 0);
    EXPECT_LT(accepted, drafted);
  }
}

// Proposes the classic output's next token, then the token the unconstrained target itself
// would choose after it: a tempting draft, which a grammar of one long identifier often forbids (the
// code model wants spaces, brackets, newlines). Were the verify rows not masked, the target's
// greedy choice there would equal it.
class TemptingDrafter : public Drafter {
 public:
  TemptingDrafter(Model& model, std::vector<int32_t> truth)
      : model_(model), truth_(std::move(truth)) {}
  std::string name() const override { return "tempting"; }
  std::vector<int32_t> propose(std::span<const int32_t> history, int64_t prompt_len,
                               int k) override {
    const size_t at = history.size() - static_cast<size_t>(prompt_len);  // output tokens so far
    if (k < 2 || at >= truth_.size()) return {};
    std::vector<int32_t> ids(history.begin(), history.end());
    ids.push_back(truth_[at]);
    auto seq = model_.new_sequence();
    const ForwardResult out = prefill(model_, *seq, ids);
    const int64_t V = model_.config().vocab_size;
    const float* row = out.logits.data();
    const int32_t best = static_cast<int32_t>(std::max_element(row, row + V) - row);
    tempting.push_back(best);
    return {truth_[at], best};
  }
  std::vector<int32_t> tempting;  // every second draft proposed

 private:
  Model& model_;
  std::vector<int32_t> truth_;
};

TEST(ConstrainedDecode, AForbiddenDraftIsRejectedAndChangesNothing) {
  Shipped& s = shipped();
  const std::string pattern = "[a-z_]{1,80}";
  const auto c = s.compile(ConstraintSpec::regex(pattern));
  const auto prompt = s.prompt(kPrompts[0]);
  for (float temp : {0.0f, 0.8f}) {
    const GenerateResult classic = generate(*s.model, prompt, s.options(c, temp, 40));
    ASSERT_GE(classic.tokens.size(), 4u);
    TemptingDrafter d(*s.model, classic.tokens);
    GenerateOptions o = s.options(c, temp, 40);
    o.drafter = &d;
    o.draft_width = 2;
    const GenerateResult r = generate(*s.model, prompt, o);
    EXPECT_EQ(r.tokens, classic.tokens) << "temperature " << temp;
    // Some tempting drafts were forbidden, and none of those was kept.
    int64_t forbidden = 0;
    for (int32_t t : d.tempting)
      forbidden += !std::regex_match(s.tok->token_bytes(t), std::regex("[a-z_]+"));
    EXPECT_GT(forbidden, 0);
    EXPECT_GT(r.spec.accepted, 0);
    EXPECT_LE(r.spec.accepted, r.spec.drafted - forbidden);
    EXPECT_TRUE(std::regex_match(s.tok->decode(r.tokens, true), std::regex(pattern)));
  }
}

TEST(ConstrainedDecode, TrackerCutsTheBlockAtTheFirstForbiddenDraftAndRollsBack) {
  Shipped& s = shipped();
  const auto c = s.compile(ConstraintSpec::regex("[0-9]+"));
  const int32_t one = s.tok->encode("1", false).at(0), two = s.tok->encode("2", false).at(0);
  const int32_t letter = s.tok->encode("x", false).at(0);
  ConstraintTracker t(c);
  EXPECT_EQ(t.plan({}), 0u);
  EXPECT_FALSE(t.masks_taken()) << "without a budget the masks wait for take_masks()";
  t.take_masks();
  EXPECT_TRUE(t.mask(0)->test(one));
  EXPECT_FALSE(t.mask(0)->test(letter));
  for (int32_t e : s.eos) EXPECT_FALSE(t.mask(0)->test(e)) << "nothing written yet: no EOS";
  t.settle(std::vector<int32_t>{one});
  const std::vector<int32_t> drafts = {two, letter, one};
  EXPECT_EQ(t.plan(drafts), 1u);  // "2" allowed, "x" forbidden: the block stops there
  t.take_masks();
  EXPECT_FALSE(t.mask(0)->test(letter)) << "row 0: after \"1\"";
  for (int32_t e : s.eos) EXPECT_TRUE(t.mask(1)->test(e)) << "\"12\" may end";
  // The target chose "1" after "1" (not the draft "2"): the state drops the draft.
  t.settle(std::vector<int32_t>{one});
  EXPECT_EQ(check_constraint(*c, std::vector<int32_t>{one, one, s.eos[0]}),
            ConstraintCheck::kComplete);
  EXPECT_EQ(check_constraint(*c, std::vector<int32_t>{one, letter}), ConstraintCheck::kInvalid);
  EXPECT_EQ(check_constraint(*c, std::vector<int32_t>{}), ConstraintCheck::kIncomplete);
}

TEST(ConstrainedDecode, TheGrammarsEndStopsTheOutput) {
  Shipped& s = shipped();
  const auto prompt = s.prompt(kPrompts[1]);
  // With EOS ids: once three digits are written only EOS is allowed, and it ends the output.
  const auto with_eos = s.compile(ConstraintSpec::regex("[0-9]{3}"));
  GenerateOptions o = s.options(with_eos, 0.0f, 50);
  o.eos_ids.clear();  // the constraint's EOS stops it even when the request lists none
  const GenerateResult a = generate(*s.model, prompt, o);
  EXPECT_EQ(a.finish_reason, "stop");
  ASSERT_FALSE(a.tokens.empty());
  EXPECT_TRUE(with_eos->vocab().is_eos(a.tokens.back()));
  EXPECT_TRUE(std::regex_match(s.tok->decode(a.tokens, true), std::regex("[0-9]{3}")));
  // Without: the output stops at the grammar's end, no EOS token emitted.
  const auto no_eos = s.compile(ConstraintSpec::regex("[0-9]{3}"), false);
  const GenerateResult b = generate(*s.model, prompt, s.options(no_eos, 0.0f, 50));
  EXPECT_EQ(b.finish_reason, "stop");
  EXPECT_EQ(s.tok->decode(b.tokens, true), s.tok->decode(a.tokens, true));
  EXPECT_EQ(b.tokens.size() + 1, a.tokens.size());
  // Cut by max_tokens: an incomplete prefix, reported as such.
  const auto obj = s.compile(ConstraintSpec::json_object());
  const GenerateResult cut = generate(*s.model, prompt, s.options(obj, 0.0f, 3));
  EXPECT_EQ(cut.finish_reason, "length");
  EXPECT_EQ(check_constraint(*obj, cut.tokens), ConstraintCheck::kIncomplete);
}

}  // namespace
}  // namespace lockstep
