// Constrained decoding: the contract the sampler, decoder and server use.
//
//   auto vocab = std::make_shared<TokenVocabulary>(token_bytes, eos_ids);      // once per tokenizer
//   auto c = Constraint::compile(ConstraintSpec::json_schema(text), vocab);    // once per schema,
//                                                                              // shared by requests
//   ConstraintState st = c->start();                       // one per sequence
//   st.allowed(mask); apply_mask(logits_row, mask);        // before the choice rule
//   int32_t t = choose(...); st.accept(t);                 // advance by the chosen token
//
// The invariance rule (../shared/DESIGN.md, "Constraints"): the mask at a position is a pure
// function of the constraint and the exact token prefix accepted before it. Caches inside (the
// shared context cache, a sequence's matcher arena) only remember results; they never change
// one. Speculative verification checks a drafted block token by token: for each drafted token,
// the target's choice at that position is made on logits masked by allowed() of the prefix up to
// it, and a drafted token that the mask forbids differs from that choice, so it is rejected like
// any mismatch; then rollback(n) drops the rejected tail. So constrained text is identical with
// and without speculation, alone or batched.
//
// Compile errors (syntax, unsupported JSON Schema keyword, left recursion, a constraint that
// matches nothing) are lockstep::Error whose message names the place: "grammar line L column C:
// expected ...", "regex at offset N: ...", "json schema at /properties/x: unsupported keyword
// 'not'". The server returns them as 400.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "constraints/grammar.h"
#include "constraints/json_schema.h"
#include "constraints/matcher.h"
#include "constraints/token_mask.h"
#include "constraints/token_vocab.h"

namespace lockstep::constraints {

struct ConstraintSpec {
  enum class Kind { kGbnf, kRegex, kJsonSchema, kJsonObject, kJsonValue };
  Kind kind = Kind::kJsonValue;
  std::string text;        // the GBNF grammar, the regular expression or the schema's JSON text
  JsonSchemaOptions json;  // kJsonSchema / kJsonObject / kJsonValue: whitespace and dialect

  static ConstraintSpec gbnf(std::string grammar) { return {Kind::kGbnf, std::move(grammar), {}}; }
  // The whole output must match (anchors are implicit); see regex.h for the syntax.
  static ConstraintSpec regex(std::string pattern) { return {Kind::kRegex, std::move(pattern), {}}; }
  static ConstraintSpec json_schema(std::string schema, JsonSchemaOptions o = {}) {
    return {Kind::kJsonSchema, std::move(schema), o};
  }
  // response_format {"type": "json_object"}: any JSON object.
  static ConstraintSpec json_object(JsonSchemaOptions o = {}) { return {Kind::kJsonObject, {}, o}; }
  static ConstraintSpec json_value(JsonSchemaOptions o = {}) { return {Kind::kJsonValue, {}, o}; }
};

// The grammar of a spec, without a vocabulary (throws lockstep::Error as described above).
Grammar compile_grammar(const ConstraintSpec& spec);

class ConstraintState;

// A compiled constraint over one vocabulary: immutable to its users and safe to share between
// threads and requests (the context cache inside is locked).
class Constraint : public std::enable_shared_from_this<Constraint> {
 public:
  static std::shared_ptr<const Constraint> compile(const ConstraintSpec& spec,
                                                   std::shared_ptr<const TokenVocabulary> vocab);
  // context_depth: see ContextMaskCache (changes speed and memory, never a mask).
  static std::shared_ptr<const Constraint> from_grammar(Grammar grammar,
                                                        std::shared_ptr<const TokenVocabulary> vocab,
                                                        int context_depth = ContextMaskCache::kDefaultDepth);

  ConstraintState start() const;
  const Grammar& grammar() const { return grammar_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  ContextMaskCache& contexts() const { return *contexts_; }

  Constraint(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab, int context_depth);

 private:
  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::unique_ptr<ContextMaskCache> contexts_;
};

// One sequence's position in a constraint: the matcher state after each accepted token, kept as
// a stack so rollback is popping. Copying (clone()) gives an independent state that may be used
// on another thread; a state itself is not thread-safe.
class ConstraintState {
 public:
  // The tokens allowed next: every token whose bytes the grammar can consume from here, plus
  // the EOS ids when the grammar can end here (can_end()). `out` is resized to the vocabulary.
  // Empty only after EOS was accepted (finished()): a live state always allows something,
  // because grammars are pruned of branches that cannot complete.
  void allowed(TokenMask& out);
  // Advances by `token` and returns true when allowed() would contain it; otherwise returns
  // false and leaves the state unchanged.
  bool accept(int32_t token);
  // True when the text so far is a complete sentence (EOS is allowed).
  bool can_end() const;
  // True when EOS has been accepted, or when the grammar has ended and admits no more bytes
  // (then only EOS is allowed).
  bool finished() const { return ended_ || !has_more(); }
  // Tokens accepted since start().
  size_t size() const { return history_.size() - 1; }
  // Undoes the last n accepted tokens (n <= size()). O(n).
  void rollback(size_t n);
  ConstraintState clone() const { return *this; }

  ConstraintState(const ConstraintState& other);
  ConstraintState& operator=(const ConstraintState&) = delete;
  ConstraintState(ConstraintState&&) = default;

 private:
  friend class Constraint;
  explicit ConstraintState(std::shared_ptr<const Constraint> constraint);
  bool has_more() const;
  Matcher::StateId current() const { return history_.back(); }

  std::shared_ptr<const Constraint> constraint_;
  std::unique_ptr<Matcher> matcher_;
  std::vector<Matcher::StateId> history_;  // [0]: start; one entry per accepted token
  bool ended_ = false;                     // EOS accepted (its history entry repeats the last)
  size_t eos_at_ = 0;                      // history size when EOS was accepted
  std::unordered_map<Matcher::StackId, std::shared_ptr<const ContextTokens>> contexts_;
};

// Sets every logit whose token `mask` does not allow to -infinity. Ids at or past mask.size()
// (padding rows of a model vocabulary larger than the tokenizer's) are never allowed.
void apply_mask(std::span<float> logits, const TokenMask& mask);

}  // namespace lockstep::constraints
