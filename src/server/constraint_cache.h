// Compiled response_format constraints for the served model. The token vocabulary the constraint
// engine needs (each id's bytes and the ids that end an output) is built once per model, on first
// use; compiled constraints are kept in a small LRU keyed by the spec, so a client that sends the
// same schema with every request pays for compiling it once. Shared by every HTTP worker.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "constraints/constraint.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::server {

class ConstraintCache {
 public:
  // eos_ids: the model's end-of-sequence ids (ServingContext::eos_ids); the chat template's
  // end-of-turn tokens are added to them, as `lockstep generate --json-schema` does, so a
  // server answer and the CLI's end at the same token.
  // shown: special tokens a built grammar may spell with their text (the tool-call markers,
  // tools::family_markers); everywhere else special tokens are never allowed.
  ConstraintCache(const Tokenizer& tokenizer, std::vector<int32_t> eos_ids, int64_t model_vocab,
                  size_t capacity = 64, std::vector<int32_t> shown = {});

  // The compiled constraint of `spec`. with_eos false (a request with ignore_eos): a vocabulary
  // without end ids, so the output stops only where the grammar has ended. Throws lockstep::Error
  // on a compile error (the message names the place, see constraints/constraint.h).
  std::shared_ptr<const constraints::Constraint> get(const constraints::ConstraintSpec& spec,
                                                     bool with_eos);
  // A grammar built by the server itself (a forced tool call's, a constraint after a reasoning
  // block), cached under `key`, which must name everything the grammar depends on. `build` runs
  // on a miss and may throw lockstep::Error. shown: over the vocabulary in which the tool-call
  // markers' special tokens spell their text (else special tokens are never allowed, as get()).
  std::shared_ptr<const constraints::Constraint> get_built(const std::string& key,
                                                           const std::function<constraints::Grammar()>& build,
                                                           bool with_eos, bool shown = true);

  size_t size() const;       // compiled constraints held
  size_t compiles() const;   // compilations so far (cache misses), for tests

  // The model's constraint vocabulary (built on first use), special tokens without bytes.
  std::shared_ptr<const constraints::TokenVocabulary> vocabulary(bool with_eos);

 private:
  std::shared_ptr<const constraints::TokenVocabulary> shown_vocabulary(bool with_eos);
  std::shared_ptr<const constraints::Constraint> lookup(const std::string& key);
  std::shared_ptr<const constraints::Constraint> insert(const std::string& key,
                                                        std::shared_ptr<const constraints::Constraint> compiled);

  const Tokenizer& tokenizer_;
  std::vector<int32_t> eos_ids_;
  int64_t model_vocab_;
  size_t capacity_;

  std::once_flag vocab_once_[2];
  std::shared_ptr<const constraints::TokenVocabulary> vocab_[2];  // [with_eos]
  std::vector<int32_t> shown_;
  std::once_flag shown_once_[2];
  std::shared_ptr<const constraints::TokenVocabulary> shown_vocab_[2];  // vocab_ with shown_ spelled

  using Entry = std::pair<std::string, std::shared_ptr<const constraints::Constraint>>;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t compiles_ = 0;
};

}  // namespace lockstep::server
