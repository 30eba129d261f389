// The reasoning budget in the decoder. On a hand-made vocabulary: the tracker forces the close
// row by row, cuts a drafted block at a draft that differs from a forced token, accepts a draft
// equal to it, and lets a grammar that forbids the close win. On the shipped model, with a prompt
// that ends inside "<think>": exactly N free tokens, then the close's tokens, then the answer;
// the generation gate (chunked, batched, lookup / draft / MTP, greedy and seeded)
// finds no divergence, with and without a JSON grammar after the block; a drafter that proposes
// the wrong token at every forced position changes nothing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "constraints/gbnf.h"
#include "constraints/reasoning_prefix.h"
#include "decode/constraint_tracker.h"
#include "decode/constraint_vocab.h"
#include "decode/verify_gate.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace lockstep {
namespace {

using constraints::Constraint;
using constraints::ReasoningBudget;
using constraints::ReasoningBudgetSpec;
using constraints::ReasoningStart;

// ---- the tracker, on a vocabulary small enough to read ----

enum : int32_t { kNl, kClose, kNlNl, kA, kOk, kEos, kCount };

std::shared_ptr<const constraints::TokenVocabulary> small_vocab() {
  return std::make_shared<constraints::TokenVocabulary>(
      std::vector<std::string>{"\n", "</think>", "\n\n", "a", "ok", ""}, std::vector<int32_t>{kEos});
}

std::shared_ptr<const ReasoningBudget> small_budget(int64_t n) {
  ReasoningBudgetSpec spec;
  spec.budget = n;
  spec.start = ReasoningStart::kOpened;
  spec.close = {kNl, kClose, kNlNl};
  return ReasoningBudget::make(spec, small_vocab());
}

TEST(ReasoningBudgetTracker, ForcesTheCloseRowByRowAndCutsAWrongDraft) {
  ConstraintTracker t(nullptr, small_budget(2));
  EXPECT_EQ(t.plan({}), 0u);
  EXPECT_EQ(t.mask(0), nullptr) << "no grammar: any token";
  EXPECT_EQ(t.forced(0), -1);
  t.settle(std::vector<int32_t>{kA});
  // Drafts [a, \n, </think>, a]: the first spends the budget, so rows 1..3 are forced to the
  // close; "\n" and "</think>" are drafted right and kept, the last draft "a" differs from the
  // forced "\n\n" and is cut.
  const std::vector<int32_t> drafts = {kA, kNl, kClose, kA};
  EXPECT_EQ(t.plan(drafts), 3u);
  EXPECT_EQ(t.forced(0), -1);
  EXPECT_EQ(t.forced(1), kNl);
  EXPECT_EQ(t.forced(2), kClose);
  EXPECT_EQ(t.forced(3), kNlNl);
  // The target kept two drafts and chose the forced "</think>" itself.
  t.settle(std::vector<int32_t>{kA, kNl, kClose});
  EXPECT_EQ(t.plan(std::vector<int32_t>{kA}), 0u) << "a draft other than the forced \\n\\n";
  EXPECT_EQ(t.forced(0), kNlNl);
  t.settle(std::vector<int32_t>{kNlNl});
  EXPECT_EQ(t.plan(std::vector<int32_t>{kA, kA, kA}), 3u) << "the block is closed: anything goes";
  for (size_t r = 0; r < 4; ++r) EXPECT_EQ(t.forced(r), -1);
}

TEST(ReasoningBudgetTracker, ComposesWithTheGrammarAfterTheBlock) {
  const auto answer = constraints::parse_gbnf(R"(root ::= "ok")");
  const auto c = Constraint::from_grammar(constraints::after_reasoning(answer, ReasoningStart::kOpened),
                                          small_vocab());
  ConstraintTracker t(c, small_budget(1));
  t.plan({});
  ASSERT_NE(t.mask(0), nullptr);
  EXPECT_TRUE(t.mask(0)->test(kOk)) << "inside the block, any text";
  EXPECT_FALSE(t.mask(0)->test(kEos)) << "the answer is still to come";
  t.settle(std::vector<int32_t>{kA});
  for (int32_t want : {kNl, kClose, kNlNl}) {
    t.plan({});
    ASSERT_EQ(t.forced(0), want);
    EXPECT_TRUE(t.mask(0)->test(want));
    t.settle(std::vector<int32_t>{want});
  }
  t.plan({});
  EXPECT_EQ(t.forced(0), -1);
  EXPECT_TRUE(t.mask(0)->test(kOk));
  EXPECT_FALSE(t.mask(0)->test(kA));
  t.settle(std::vector<int32_t>{kOk});
  t.plan({});
  EXPECT_TRUE(t.mask(0)->test(kEos));
  EXPECT_TRUE(t.is_eos(kEos));
}

TEST(ReasoningBudgetTracker, AGrammarThatForbidsTheCloseWins) {
  // A grammar with no reasoning block at all: "a" forever. The budget would force "\n" after one
  // token; the grammar forbids it, so the row is not forced and the output stays valid.
  const auto c = Constraint::from_grammar(constraints::parse_gbnf(R"(root ::= "a"+)"), small_vocab());
  ConstraintTracker t(c, small_budget(1));
  t.plan({});
  t.settle(std::vector<int32_t>{kA});
  t.plan({});
  EXPECT_EQ(t.forced(0), -1);
  EXPECT_FALSE(t.mask(0)->test(kNl));
}

// ---- the shipped model ----

const std::string kTarget = std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-16m";
const std::string kDraft = std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-draft-3m";

struct Shipped {
  std::unique_ptr<Tokenizer> tok = Tokenizer::load(kTarget);
  std::unique_ptr<Model> model = load_model(kTarget);
  std::vector<int32_t> eos = model->config().eos_token_ids;
  std::shared_ptr<const constraints::TokenVocabulary> vocab =
      token_vocabulary(*tok, eos, model->config().vocab_size);
  std::vector<int32_t> close = tok->encode("\n</think>\n\n", false);

  std::shared_ptr<const ReasoningBudget> budget(int64_t n) {
    ReasoningBudgetSpec spec;
    spec.budget = n;
    spec.start = ReasoningStart::kOpened;
    spec.close = close;
    return ReasoningBudget::make(spec, vocab);
  }
  // Prompts that end inside a reasoning block, as a thinking template's generation prompt does.
  std::vector<int32_t> prompt(const std::string& question) {
    return tok->encode("<|im_start|>user\n" + question + "<|im_end|>\n<|im_start|>assistant\n<think>\n", true);
  }
};

Shipped& shipped() {
  static Shipped s;
  return s;
}

GenerateOptions options(std::shared_ptr<const ReasoningBudget> b, float temp, int64_t n) {
  GenerateOptions o;
  o.max_tokens = n;
  o.eos_ids = shipped().eos;
  o.sampling.temperature = temp;
  o.sampling.seed = 5;
  o.reasoning_budget = std::move(b);
  return o;
}

// The index of the output token that completes "</think>" (the model closing its block
// itself), or -1.
int64_t natural_close(const Tokenizer& tok, const std::vector<int32_t>& tokens) {
  for (size_t i = 1; i <= tokens.size(); ++i)
    if (tok.decode(std::span<const int32_t>(tokens.data(), i), false).find("</think>") != std::string::npos)
      return static_cast<int64_t>(i) - 1;
  return -1;
}

TEST(ReasoningBudgetDecode, ExactlyTheBudgetThenTheCloseThenTheAnswer) {
  Shipped& s = shipped();
  ASSERT_GE(s.close.size(), 2u);
  // After the first prompt the code model writes "</think>" itself within two tokens; after the
  // second it does not for a long while. Both cases must occur, or the test proves less.
  bool forced_seen = false, untouched_seen = false;
  for (const std::string q : {"Write a function that parses arguments.", "Write a stack class."})
    for (int64_t n : {0, 6})
      for (float temp : {0.0f, 0.8f}) {
        const auto prompt = s.prompt(q);
        const GenerateResult r = generate(*s.model, prompt, options(s.budget(n), temp, n + 20));
        const GenerateResult open = generate(*s.model, prompt, options(nullptr, temp, n + 20));
        SCOPED_TRACE(q + " budget " + std::to_string(n) + ", temperature " + std::to_string(temp) + ": " +
                     s.tok->decode(r.tokens, false));
        const int64_t closed_at = natural_close(*s.tok, open.tokens);
        if (closed_at >= 0 && closed_at < n) {
          // Closed within the budget: the budget never acts.
          EXPECT_EQ(r.tokens, open.tokens);
          untouched_seen = true;
          continue;
        }
        forced_seen = true;
        // The first n tokens are the model's own, then the close, then the answer.
        ASSERT_GE(r.tokens.size(), static_cast<size_t>(n) + s.close.size());
        EXPECT_EQ(std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + n),
                  std::vector<int32_t>(open.tokens.begin(), open.tokens.begin() + n));
        EXPECT_EQ(std::vector<int32_t>(r.tokens.begin() + n, r.tokens.begin() + n + static_cast<int64_t>(s.close.size())),
                  s.close);
        EXPECT_EQ(natural_close(*s.tok, r.tokens), n + natural_close(*s.tok, s.close))
            << "the first \"</think>\" in the output is the forced one";
      }
  EXPECT_TRUE(forced_seen);
  EXPECT_TRUE(untouched_seen);
}

GateConfig gate_config(std::shared_ptr<const ReasoningBudget> b, Model* draft) {
  Shipped& s = shipped();
  GateConfig cfg;
  cfg.prompts = {s.prompt("Write a stack class."), s.prompt("Explain the function parse_args.")};
  cfg.max_tokens = 14;
  cfg.eos_ids = s.eos;
  // One width per mode keeps this to seconds; tests/cli/server_structured.sh serves widths 1
  // and 3 of every mode.
  cfg.lookup_widths = {3};
  cfg.draft_widths = {2};
  cfg.mtp_widths = {3};
  cfg.draft_model = draft;
  cfg.reasoning_budget = std::move(b);
  return cfg;
}

TEST(ReasoningBudgetDecode, GateFindsNoDivergenceWithOrWithoutAGrammar) {
  Shipped& s = shipped();
  auto draft = load_model(kDraft);
  ASSERT_NE(s.model->mtp(), nullptr);
  // Budgets that end inside the drafted blocks of every width.
  GateConfig plain = gate_config(s.budget(5), draft.get());
  const GateReport a = run_gate(*s.model, plain);
  EXPECT_EQ(a.cases.size(), 2u * 2u * (1 + 1 + 1 + 1 + 1));
  EXPECT_EQ(a.diverged(), 0u);
  // A JSON answer after the block: the forced close is text the reasoning grammar allows.
  GateConfig json = gate_config(s.budget(3), draft.get());
  json.prompts.resize(1);
  json.max_tokens = 24;
  json.constraint = Constraint::from_grammar(
      constraints::after_reasoning(constraints::compile_grammar(constraints::ConstraintSpec::json_object()),
                                   ReasoningStart::kOpened),
      s.vocab);
  const GateReport b = run_gate(*s.model, json);
  EXPECT_EQ(b.diverged(), 0u);
  EXPECT_EQ(b.constraint_invalid, 0u);
  const GenerateResult r = generate(*s.model, json.prompts[0], [&] {
    GenerateOptions o = options(json.reasoning_budget, 0.0f, 60);
    o.constraint = json.constraint;
    return o;
  }());
  const std::string text = s.tok->decode(r.tokens, true);
  const size_t end = text.find("</think>");
  ASSERT_NE(end, std::string::npos) << text;
  EXPECT_EQ(r.finish_reason, "stop") << text;
  // Throws (fails the test) unless what follows the block is one JSON object.
  const auto j = nlohmann::json::parse(text.substr(end + 8));
  EXPECT_TRUE(j.is_object()) << text;
}

// Proposes the classic output token by token, except at the forced positions, where it proposes
// something else: each such draft must be rejected, the rest accepted.
class WrongAtTheCloseDrafter : public Drafter {
 public:
  WrongAtTheCloseDrafter(std::vector<int32_t> truth, size_t first_forced, size_t forced_count)
      : truth_(std::move(truth)), from_(first_forced), to_(first_forced + forced_count) {}
  std::string name() const override { return "wrong-at-the-close"; }
  std::vector<int32_t> propose(std::span<const int32_t> history, int64_t prompt_len, int k) override {
    std::vector<int32_t> out;
    for (size_t at = history.size() - static_cast<size_t>(prompt_len); out.size() < static_cast<size_t>(k) && at < truth_.size(); ++at) {
      const bool forced = at >= from_ && at < to_;
      out.push_back(forced ? (truth_[at] + 1) % 100 : truth_[at]);
      if (forced) ++wrong;
    }
    return out;
  }
  int64_t wrong = 0;

 private:
  std::vector<int32_t> truth_;
  size_t from_, to_;
};

TEST(ReasoningBudgetDecode, AWrongDraftAtAForcedPositionIsRejectedAndChangesNothing) {
  Shipped& s = shipped();
  const auto prompt = s.prompt("Write a stack class.");
  for (float temp : {0.0f, 0.8f}) {
    const GenerateResult classic = generate(*s.model, prompt, options(s.budget(4), temp, 14));
    WrongAtTheCloseDrafter d(classic.tokens, 4, s.close.size());
    GenerateOptions o = options(s.budget(4), temp, 14);
    o.drafter = &d;
    o.draft_width = 3;
    const GenerateResult r = generate(*s.model, prompt, o);
    EXPECT_EQ(r.tokens, classic.tokens) << "temperature " << temp;
    EXPECT_GT(d.wrong, 0);
    EXPECT_GT(r.spec.accepted, 0);
    EXPECT_LE(r.spec.accepted, r.spec.drafted - d.wrong);
  }
}

}  // namespace
}  // namespace lockstep
