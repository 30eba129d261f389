// A constrained generation gives the same tokens whether the backend chooses each row under the
// row's mask (TokenRule::allowed, the default) or the host masks the downloaded logits and
// chooses (what a request asking for logprobs takes): JSON schema, json_object and a regex;
// greedy, seeded, penalties and filters; classic decode, chunked prefill, lookup and draft-model
// speculation (each verify row under its own mask). Also checks that the default path does
// carry masks on its rules (set by ForwardItem::before_choose), so the comparison is not between
// two host paths.
#include <gtest/gtest.h>

#include "decode/constraint_tracker.h"
#include "decode/constraint_vocab.h"
#include "decode/generate.h"
#include "decode/sequence_decoder.h"
#include "decode/speculative/draft_model_drafter.h"
#include "decode/speculative/lookup_drafter.h"
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
    "name": {"type": "string", "maxLength": 12},
    "kind": {"enum": ["function", "class", "variable"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "lines": {"type": "integer", "minimum": 1, "maximum": 400}
  },
  "required": ["name", "kind", "tags", "lines"],
  "additionalProperties": false
})";

struct Models {
  std::unique_ptr<Tokenizer> tok = Tokenizer::load(kTarget);
  std::unique_ptr<Model> target = load_model(kTarget);
  std::unique_ptr<Model> draft = load_model(kDraft);
  std::vector<int32_t> eos = target->config().eos_token_ids;
  std::shared_ptr<const Constraint> compile(const ConstraintSpec& spec) {
    return Constraint::compile(spec, token_vocabulary(*tok, eos, target->config().vocab_size));
  }
};

Models& models() {
  static Models s;
  return s;
}

std::vector<SamplingParams> sampling() {
  std::vector<SamplingParams> p(5);
  p[1].temperature = 0.8f;
  p[1].seed = 11;
  p[2] = p[1];
  p[2].repetition_penalty = 1.3f;
  p[2].presence_penalty = 0.4f;
  p[2].frequency_penalty = -0.3f;
  p[3] = p[1];
  p[3].top_k = 8;
  p[3].top_p = 0.9f;
  p[4] = p[1];
  p[4].min_p = 0.1f;
  p[4].temperature = 1.3f;
  return p;
}

TEST(ConstrainedBackendChoice, RulesWithMasksAndTheHostPathGiveTheSameTokens) {
  Models& s = models();
  const std::vector<ConstraintSpec> specs = {ConstraintSpec::json_schema(kSchema),
                                             ConstraintSpec::json_object(),
                                             ConstraintSpec::regex("[a-z_]{1,12}\\(([a-z]+, )*\\)")};
  const std::vector<int32_t> prompt = s.tok->encode("Describe the symbol as JSON:\n", true);
  int compared = 0;
  for (const ConstraintSpec& spec : specs) {
    const auto c = s.compile(spec);
    for (const SamplingParams& sp : sampling()) {
      for (int mode = 0; mode < 4; ++mode) {  // classic, chunked prefill, lookup, draft model
        auto run = [&](bool host) {
          LookupDrafter lookup;
          DraftModelDrafter dm(*s.draft, sp);
          GenerateOptions o;
          o.sampling = sp;
          o.max_tokens = 24;
          o.eos_ids = s.eos;
          o.constraint = c;
          if (mode == 1) o.prefill_chunk = 3;
          if (mode == 2) o.drafter = &lookup;
          if (mode == 3) o.drafter = &dm;
          if (o.drafter) o.draft_width = 3;
          if (host) o.top_logprobs = 0;  // needs the logits: every row masked and chosen on the host
          return generate(*s.target, prompt, o);
        };
        const GenerateResult backend = run(false);
        const GenerateResult host = run(true);
        EXPECT_EQ(backend.tokens, host.tokens)
            << "mode " << mode << " temperature " << sp.temperature << " top_k " << sp.top_k;
        EXPECT_EQ(backend.finish_reason, host.finish_reason);
        EXPECT_EQ(backend.spec.accepted, host.spec.accepted);
        EXPECT_FALSE(backend.tokens.empty());
        EXPECT_NE(check_constraint(*c, backend.tokens), ConstraintCheck::kInvalid);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 3 * 5 * 4);
}

TEST(ConstrainedBackendChoice, ConstrainedItemsCarryEachRowsMask) {
  Models& s = models();
  const auto c = s.compile(ConstraintSpec::json_object());
  const std::vector<int32_t> prompt = s.tok->encode("JSON:", true);
  const int64_t V = s.target->config().vocab_size;
  for (const bool host : {false, true}) {
    GenerateOptions o;
    o.max_tokens = 4;
    o.constraint = c;
    if (host) o.top_logprobs = 0;
    SequenceDecoder d(*s.target, prompt, o, nullptr, nullptr);
    ForwardItem item = d.next_item();
    if (host) {
      EXPECT_TRUE(item.choose.empty()) << "the logprobs path downloads the logits";
      continue;
    }
    ASSERT_FALSE(item.choose.empty());
    const kernels::TokenRule& r = item.choose.back();
    // The mask is taken while the device runs the forward: the forward calls before_choose
    // after launching its ops and before it reads the rules.
    ASSERT_TRUE(item.before_choose);
    EXPECT_FALSE(r.masked());
    item.before_choose();
    ASSERT_TRUE(r.masked());
    EXPECT_EQ(r.allowed_size, V);
    // The first token of a JSON object: '{' (after optional whitespace) only, a small subset.
    int64_t allowed = 0;
    for (int64_t id = 0; id < V; ++id) allowed += r.allows(id);
    EXPECT_GT(allowed, 0);
    EXPECT_LT(allowed, V / 4);
    const int32_t brace = s.tok->encode("{", false).at(0);
    EXPECT_TRUE(r.allows(brace));
  }
}

}  // namespace
}  // namespace lockstep
