// Unit tests on small hand-written tokenizer.json files: error messages name the bad field,
// invalid UTF-8 has its documented behaviour, and streaming never splits a character.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "core/utf8.h"

namespace lockstep {
namespace {

using json = nlohmann::json;

// A byte-level BPE over all 256 byte characters plus a few merges ("h e", "he l", ...).
json byte_level_tokenizer() {
  json vocab = json::object();
  int id = 0;
  for (const auto& c : byte_level::byte_to_char()) vocab[c] = id++;
  for (const char* t : {"he", "hel", "hell", "hello", "\xC4\xA0w"}) vocab[t] = id++;
  return {
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", {"h e", "he l", "hel l", json::array({"hell", "o"}), "\xC4\xA0 w"}}}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", "\\s+(?!\\S)|\\s*\\S+"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens",
       {{{"id", id}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}}},
  };
}

std::string error_of(const json& j) {
  try {
    Tokenizer::from_json(j.dump());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Tokenizer, EncodesAndDecodesSmallByteLevelVocabulary) {
  const auto tok = Tokenizer::from_json(byte_level_tokenizer().dump());
  const auto ids = tok->encode("hello world<|end|>", false);
  ASSERT_EQ(ids.size(), 7u);  // hello, Ġw, o, r, l, d, <|end|>
  EXPECT_EQ(tok->id_to_piece(ids[0]), "hello");
  EXPECT_EQ(tok->id_to_piece(ids[1]), "\xC4\xA0w");
  EXPECT_TRUE(tok->is_special(ids.back()));
  EXPECT_EQ(tok->decode(ids), "hello world<|end|>");
  EXPECT_EQ(tok->decode(ids, true), "hello world");
  EXPECT_EQ(tok->vocab_size(), 262);
  EXPECT_EQ(tok->token_id("<|end|>"), ids.back());
}

TEST(Tokenizer, InvalidUtf8BecomesReplacementCharacters) {
  const auto tok = Tokenizer::from_json(byte_level_tokenizer().dump());
  // Each maximal ill-formed subsequence is one U+FFFD: \xE4\xBD (truncated) is one, \xFF one.
  EXPECT_EQ(utf8::sanitize("a\xE4\xBD" "b\xFF"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  EXPECT_EQ(utf8::sanitize("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tok->encode("x\xC0\xAFy", false), tok->encode("x\xEF\xBF\xBD\xEF\xBF\xBDy", false));
  EXPECT_EQ(tok->decode(tok->encode("\xF0\x9F\x98", false)), "\xEF\xBF\xBD");
}

TEST(Tokenizer, StreamingNeverSplitsACharacter) {
  const auto tok = Tokenizer::from_json(byte_level_tokenizer().dump());
  const std::string text = "h\xE4\xBD\xA0\xF0\x9F\x98\x80 hello";  // 你 and 😀, one byte per id
  const auto ids = tok->encode(text, false);
  StreamDecoder s(*tok);
  std::string all;
  for (int32_t id : ids) {
    const std::string part = s.push(id);
    EXPECT_TRUE(utf8::is_valid(part));
    EXPECT_EQ(part.find("\xEF\xBF\xBD"), std::string::npos);
    all += part;
  }
  all += s.flush();
  EXPECT_EQ(all, text);
}

TEST(Tokenizer, MalformedFilesNameTheField) {
  json j = byte_level_tokenizer();
  j.erase("model");
  EXPECT_NE(error_of(j).find("tokenizer.json.model: missing"), std::string::npos) << error_of(j);

  j = byte_level_tokenizer();
  j["model"]["merges"][1] = 7;
  EXPECT_NE(error_of(j).find("model.merges[1]: expected"), std::string::npos) << error_of(j);

  j = byte_level_tokenizer();
  j["model"]["merges"][0] = "h zz";
  EXPECT_NE(error_of(j).find("\"zz\" is not in model.vocab"), std::string::npos);

  j = byte_level_tokenizer();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_NE(error_of(j).find("pre_tokenizer.pretokenizers[0].pattern: invalid regex"),
            std::string::npos)
      << error_of(j);

  j = byte_level_tokenizer();
  j["normalizer"]["type"] = "Precompiled";
  EXPECT_NE(error_of(j).find("normalizer.type: unsupported normalizer"), std::string::npos);

  j = byte_level_tokenizer();
  j["model"]["vocab"]["he"] = "x";
  EXPECT_NE(error_of(j).find("model.vocab[\"he\"]"), std::string::npos) << error_of(j);

  j = byte_level_tokenizer();
  j["added_tokens"][0]["content"] = 5;
  EXPECT_NE(error_of(j).find("added_tokens[0].content: expected a string"), std::string::npos);

  // Found by fuzz_tokenizer_load: a missing unk token used to fail only mid-encode, and a null
  // vocabulary entry dereferenced a null tree node.
  j = byte_level_tokenizer();
  j["model"]["unk_token"] = "<nope>";
  EXPECT_NE(error_of(j).find("model.unk_token"), std::string::npos) << error_of(j);
  j = byte_level_tokenizer();
  j["model"]["vocab"]["he"] = nullptr;
  EXPECT_NE(error_of(j).find("model.vocab[\"he\"]"), std::string::npos) << error_of(j);

  EXPECT_THROW(Tokenizer::from_json("{not json"), Error);
  EXPECT_THROW(Tokenizer::from_json("[]"), Error);
}

TEST(Tokenizer, MissingTokenizerFileIsReported) {
  EXPECT_FALSE(has_tokenizer("/nonexistent-dir"));
  EXPECT_THROW(Tokenizer::load("/nonexistent-dir"), Error);
}

}  // namespace
}  // namespace lockstep
