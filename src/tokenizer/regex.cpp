#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "core/error.h"
#include "core/utf8.h"

namespace lockstep {

struct Regex::Impl {
  pcre2_code* code = nullptr;
};

namespace {

// One match-data block per thread, grown on demand: encode may run on many threads at once and
// allocating a block per call would dominate short inputs.
struct MatchData {
  pcre2_match_data* md = nullptr;
  ~MatchData() { pcre2_match_data_free(md); }
};

pcre2_match_data* thread_match_data() {
  thread_local MatchData data;
  if (!data.md) data.md = pcre2_match_data_create(16, nullptr);
  return data.md;
}

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where) : impl_(new Impl) {
  int err = 0;
  PCRE2_SIZE at = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &at, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail(where, ": invalid regex at offset ", at, ": ", reinterpret_cast<const char*>(msg));
  }
  // JIT is an optimisation only; if the platform lacks it the interpreter gives the same matches.
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() {
  if (impl_) pcre2_code_free(impl_->code);
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  pcre2_match_data* md = thread_match_data();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // Mirrors the iterator of the Rust onig crate: an empty match right where the previous match
  // ended is rejected and the search moves on by one character.
  size_t start = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (start <= text.size()) {
    // The subject was validated once by the caller; re-checking it per match would be quadratic.
    const int rc = pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md,
                               nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("regex match failed (PCRE2 error ", rc, ")");
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    if (e < b) e = b;  // \K can report an end before the start; treat it as empty
    if (e == b && have_last && last_end == e) {
      if (start >= text.size()) break;
      const size_t n = utf8::char_len(text, start);
      start += n ? n : 1;
      continue;
    }
    out.emplace_back(b, e);
    start = e;
    have_last = true;
    last_end = e;
  }
  return out;
}

std::string Regex::escape(std::string_view literal) {
  // \Q..\E quotes everything except a literal "\E", which we split around.
  std::string out = "\\Q";
  for (size_t i = 0; i < literal.size(); ++i) {
    if (literal[i] == '\\' && i + 1 < literal.size() && literal[i + 1] == 'E') {
      out += "\\E\\\\\\QE";
      ++i;
    } else {
      out += literal[i];
    }
  }
  out += "\\E";
  return out;
}

}  // namespace lockstep
