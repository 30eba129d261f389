// Constraint and ConstraintState (see constraint.h).
#include "constraints/constraint.h"

#include <limits>

#include "constraints/gbnf.h"
#include "constraints/regex.h"
#include "core/error.h"

namespace lockstep::constraints {

Grammar compile_grammar(const ConstraintSpec& spec) {
  switch (spec.kind) {
    case ConstraintSpec::Kind::kGbnf:
      return parse_gbnf(spec.text);
    case ConstraintSpec::Kind::kRegex:
      return compile_regex(spec.text);
    case ConstraintSpec::Kind::kJsonSchema:
      return compile_json_schema(spec.text, spec.json);
    case ConstraintSpec::Kind::kJsonObject:
      return compile_json_schema(R"({"type":"object"})", spec.json);
    case ConstraintSpec::Kind::kJsonValue:
      return compile_json_schema("true", spec.json);
  }
  fail("constraint: unknown kind");
}

Constraint::Constraint(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab, int context_depth)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)),
      contexts_(std::make_unique<ContextMaskCache>(grammar_, *vocab_, context_depth)) {}

std::shared_ptr<const Constraint> Constraint::compile(const ConstraintSpec& spec,
                                                      std::shared_ptr<const TokenVocabulary> vocab) {
  return from_grammar(compile_grammar(spec), std::move(vocab));
}

std::shared_ptr<const Constraint> Constraint::from_grammar(Grammar grammar,
                                                           std::shared_ptr<const TokenVocabulary> vocab,
                                                           int context_depth) {
  LOCKSTEP_CHECK(vocab != nullptr);
  return std::make_shared<Constraint>(std::move(grammar), std::move(vocab), context_depth);
}

ConstraintState Constraint::start() const { return ConstraintState(shared_from_this()); }

ConstraintState::ConstraintState(std::shared_ptr<const Constraint> constraint)
    : constraint_(std::move(constraint)),
      matcher_(std::make_unique<Matcher>(constraint_->grammar())) {
  history_.push_back(matcher_->start());
}

ConstraintState::ConstraintState(const ConstraintState& other)
    : constraint_(other.constraint_),
      matcher_(std::make_unique<Matcher>(*other.matcher_)),
      history_(other.history_),
      ended_(other.ended_),
      eos_at_(other.eos_at_),
      contexts_(other.contexts_) {}

bool ConstraintState::can_end() const { return !ended_ && matcher_->accepting(current()); }

bool ConstraintState::has_more() const { return matcher_->has_ready(current()); }

void ConstraintState::allowed(TokenMask& out) {
  const TokenVocabulary& vocab = constraint_->vocab();
  if (out.size() != vocab.size()) out.resize(vocab.size());
  out.clear();
  if (ended_) return;
  const Matcher::StateId state = current();
  // Copy: the uncertain-token checks below grow the matcher's set storage.
  const std::vector<Matcher::StackId> stacks(matcher_->stacks(state).begin(),
                                             matcher_->stacks(state).end());
  for (Matcher::StackId s : stacks) {
    if (s == Matcher::kBottom) continue;
    auto& ctx = contexts_[s];
    if (!ctx) ctx = constraint_->contexts().get(*matcher_, s);
    if (ctx->dense) {
      out.merge(ctx->accepted_bits);
    } else {
      for (int32_t id : ctx->accepted_ids) out.set(id);
    }
    if (ctx->uncertain.empty()) continue;
    const Matcher::StateId alone = matcher_->state_of(s);
    for (int32_t id : ctx->uncertain)
      if (!out.test(id) && matcher_->advance(alone, vocab.bytes(id)) != Matcher::kDead) out.set(id);
  }
  if (matcher_->accepting(state))
    for (int32_t id : vocab.eos_ids()) out.set(id);
}

bool ConstraintState::accept(int32_t token) {
  const TokenVocabulary& vocab = constraint_->vocab();
  if (ended_ || token < 0 || token >= vocab.size()) return false;
  if (vocab.is_eos(token)) {
    if (!matcher_->accepting(current())) return false;
    history_.push_back(current());
    ended_ = true;
    eos_at_ = history_.size();
    return true;
  }
  const std::string& bytes = vocab.bytes(token);
  if (bytes.empty()) return false;
  const Matcher::StateId next = matcher_->advance(current(), bytes);
  if (next == Matcher::kDead) return false;
  history_.push_back(next);
  return true;
}

void ConstraintState::rollback(size_t n) {
  if (n > size()) fail("constraint: rollback of ", n, " tokens past the ", size(), " accepted");
  history_.resize(history_.size() - n);
  if (ended_ && history_.size() < eos_at_) ended_ = false;
}

void apply_mask(std::span<float> logits, const TokenMask& mask) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i)
    if (!mask.test(static_cast<int32_t>(i))) logits[i] = ninf;
}

}  // namespace lockstep::constraints
