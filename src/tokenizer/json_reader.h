// Fast reading of tokenizer.json. Building a full JSON tree for a 10-30 MB file costs most of the
// load time (one heap node per vocabulary entry and per merge); this SAX reader streams
// model.vocab and model.merges straight into flat tables and builds a tree only for the rest.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/json_fields.h"

namespace lockstep {

struct ModelTables {
  bool has_vocab = false;   // model.vocab was an object (streamed here, left out of the tree)
  bool has_merges = false;  // model.merges was an array (streamed here, left out of the tree)
  std::vector<std::pair<std::string, int64_t>> vocab;
  // One entry per merges element: either the "a b" string form (second empty, legacy true) or
  // the ["a", "b"] form.
  struct Merge {
    std::string first, second;
    bool legacy;
  };
  std::vector<Merge> merges;
  std::string error;  // first malformed entry, with its field path; empty if none
};

// Parses `text`; on malformed JSON fails naming `name`. model.vocab/model.merges go to `tables`.
tok::json read_tokenizer_json(std::string_view text, const std::string& name, ModelTables& tables);

}  // namespace lockstep
