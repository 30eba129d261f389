// Hugging Face tokenizer.json tokenizer, producing exactly the ids of the reference library
// (Rust `tokenizers`). The pipeline is the reference's: added tokens are cut out of the raw text,
// the rest is normalized, added tokens marked "normalized" are cut out of that, the pre-tokenizer
// splits words, the BPE model encodes each word, and a post-processor adds BOS/EOS on request.
//
// Input text that is not valid UTF-8 is first made valid by replacing each ill-formed
// subsequence with U+FFFD (the WHATWG / from_utf8_lossy rule); see docs/tokenizer.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

// True when `dir` holds a tokenizer.json (model directories may come without one).
bool has_tokenizer(const std::string& dir);

class Tokenizer {
 public:
  // Reads dir/tokenizer.json and, when present, dir/tokenizer_config.json (BOS/EOS, chat
  // template), dir/chat_template.jinja and dir/generation_config.json (extra EOS ids).
  static std::unique_ptr<Tokenizer> load(const std::string& dir);
  // Builds from file contents; `name` prefixes error messages. config_json may be empty.
  static std::unique_ptr<Tokenizer> from_json(std::string_view tokenizer_json,
                                              std::string_view config_json = {},
                                              const std::string& name = "tokenizer.json");
  ~Tokenizer();

  // The reference's encode(text, add_special_tokens=add_special).ids.
  std::vector<int32_t> encode(std::string_view text, bool add_special) const;
  // The reference's decode(ids, skip_special_tokens). Unknown ids are skipped, as there.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // One past the largest id of the vocabulary or the added tokens.
  int32_t vocab_size() const;
  std::optional<int32_t> token_id(std::string_view token) const;
  // The vocabulary string of `id` (byte-level or "▁" form, as stored); empty if unknown.
  std::string id_to_piece(int32_t id) const;
  // The bytes `id` adds to the text when it follows other tokens (the stored piece with the
  // byte-level table undone, SentencePiece "▁" as a space and <0xNN> as that byte; see
  // Decoder::token_bytes). Empty for special tokens (decode with skip_special drops them) and
  // unknown ids. The concatenation over a generation is its decoded text, except that a decoder
  // which drops the text's leading space (Metaspace, a Strip after Fuse) may remove it from the
  // decode of a sequence on its own. Constrained decoding matches its grammars over these bytes.
  std::string token_bytes(int32_t id) const;
  const std::string& chat_template() const;
  std::vector<int32_t> eos_ids() const;
  std::optional<int32_t> bos_id() const;
  bool is_special(int32_t id) const;
  // True when `id` is in the vocabulary or the added tokens (decode skips other ids).
  bool contains(int32_t id) const;
  // True for "<0xNN>" tokens when the decoder has ByteFallback (used by StreamDecoder).
  bool is_fallback_byte(int32_t id) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Tokenizer();
};

// Incremental decoding for streaming output. push() returns the text that became final with this
// id; it never ends inside a UTF-8 character and holds back text that a later id could still
// change (an unfinished byte sequence). The concatenation of every push() and the final flush()
// equals tokenizer.decode(all ids, skip_special).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);
  std::string push(int32_t id);
  std::string flush();
  // What flush() would return now, without ending the stream: the pushes so far plus pending()
  // are decode(ids so far, skip_special).
  std::string pending() const;

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> window_;  // context ids, then the ids since the last cut
  std::string context_text_;     // decode of the context ids
  size_t emitted_ = 0;           // bytes after context_text_ already returned
};

}  // namespace lockstep
