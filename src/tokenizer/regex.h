// PCRE2 (JIT) wrapper for the regexes found in tokenizer.json. Hugging Face compiles them with
// Oniguruma; for the constructs tokenizers use (\p{..} classes, \s, lookahead, (?i:..) groups)
// PCRE2 in UTF + UCP mode matches the same way: leftmost, first alternative wins, backtracking.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep {

class Regex {
 public:
  // `where` names the tokenizer.json field, for the error raised on a bad pattern.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every non-overlapping match in `text` (valid UTF-8), left to right, as [begin, end) byte
  // offsets. An empty match is reported and the search resumes one character later, as
  // Oniguruma's iterator does.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

  // Escapes `literal` so that it matches itself (for String patterns).
  static std::string escape(std::string_view literal);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
