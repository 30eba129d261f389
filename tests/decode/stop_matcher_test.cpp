// StopMatcher finds, after every token, exactly what searching the whole decoded text finds
// (Tokenizer::decode(tokens, skip special), the first occurrence of any stop string): on random
// ids (unfinished UTF-8 sequences and special tokens included) and on real multilingual text.
#include "decode/stop_matcher.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

namespace lockstep {
namespace {

const std::string kSource = LOCKSTEP_SOURCE_DIR;

size_t naive_first_stop(const Tokenizer& tok, const std::vector<int32_t>& ids,
                        const std::vector<std::string>& stops) {
  const std::string text = tok.decode(ids, /*skip_special=*/true);
  size_t best = std::string::npos;
  for (const auto& s : stops)
    if (!s.empty()) best = std::min(best, text.find(s));
  return best;
}

// Every prefix of `ids` up to the first match (where a generation stops): the matcher's answer
// equals the whole-text search. Returns 1 when a stop was found (so the caller can check that
// matches were exercised at all).
int check_every_prefix(const Tokenizer& tok, const std::vector<int32_t>& ids,
                       const std::vector<std::string>& stops) {
  StopMatcher m(tok, stops);
  std::vector<int32_t> prefix;
  for (int32_t id : ids) {
    prefix.push_back(id);
    const size_t got = m.push(id), want = naive_first_stop(tok, prefix, stops);
    EXPECT_EQ(got, want) << "after " << prefix.size() << " tokens";
    if (got != want) return 0;
    if (got != std::string::npos) return 1;
  }
  return 0;
}

// Stop strings cut from the sequence's own text (so they occur), of 1 to 12 bytes (they may
// split a UTF-8 character), plus one that never occurs and an empty one (ignored).
std::vector<std::string> stops_from(const std::string& text, std::mt19937& rng, int n) {
  std::vector<std::string> stops{"\x01never\x02", ""};
  if (text.empty()) return stops;
  for (int i = 0; i < n; ++i) {
    const size_t at = rng() % text.size(), len = 1 + rng() % 12;
    stops.push_back(text.substr(at, len));
  }
  return stops;
}

TEST(StopMatcher, EqualsWholeTextSearchOnRandomIds) {
  const auto tok = Tokenizer::load(kSource + "/models/lockstep-code-16m");
  std::mt19937 rng(7);
  int matched = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int32_t> ids(20 + rng() % 60);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % tok->vocab_size());
    const auto stops = stops_from(tok->decode(ids, true), rng, 1 + trial % 3);
    matched += check_every_prefix(*tok, ids, stops);
  }
  EXPECT_GT(matched, 0);
}

TEST(StopMatcher, EqualsWholeTextSearchOnText) {
  const auto tok = Tokenizer::load(kSource + "/models/lockstep-code-16m");
  std::mt19937 rng(11);
  int matched = 0;
  for (const char* name : {"cjk.txt", "code_python.txt", "combining.txt", "contractions.txt"}) {
    std::ifstream f(kSource + "/tests/tokenizer/corpus/" + name, std::ios::binary);
    ASSERT_TRUE(f) << name;
    std::stringstream text;
    text << f.rdbuf();
    std::vector<int32_t> ids = tok->encode(text.str().substr(0, 600), /*add_special=*/false);
    const auto stops = stops_from(tok->decode(ids, true), rng, 3);
    matched += check_every_prefix(*tok, ids, stops);
  }
  EXPECT_GT(matched, 0);
}

TEST(StopMatcher, NoStopsFindsNothing) {
  const auto tok = Tokenizer::load(kSource + "/models/lockstep-code-16m");
  StopMatcher m(*tok, {"", ""});
  for (int32_t id : tok->encode("hello world", false)) EXPECT_EQ(m.push(id), std::string::npos);
}

}  // namespace
}  // namespace lockstep
