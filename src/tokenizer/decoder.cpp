#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "core/utf8.h"

namespace lockstep {

struct Decoder::Step {
  enum Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind;
  std::string from, to;        // Replace (literal pattern only)
  std::string content;         // Strip: the character removed (one UTF-8 character)
  size_t start = 0, stop = 0;  // Strip counts
  std::string replacement;     // Metaspace
  bool prepend = true;         // Metaspace: strip the leading space of the first token
};

namespace {

const char kReplacementChar[] = "\xEF\xBF\xBD";

// "<0xNN>" -> byte, the way the reference parses it (6 bytes, two hex digits).
int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int k = 3; k < 5; ++k) {
    const char c = t[k];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return -1;
    v = v * 16 + d;
  }
  return v;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

std::vector<std::string> byte_fallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  std::string bytes;
  size_t count = 0;
  auto flush = [&] {
    if (count == 0) return;
    if (utf8::is_valid(bytes)) {
      out.push_back(bytes);
    } else {
      // An invalid run becomes one U+FFFD per byte token, not per ill-formed subsequence.
      for (size_t k = 0; k < count; ++k) out.emplace_back(kReplacementChar);
    }
    bytes.clear();
    count = 0;
  };
  for (auto& t : tokens) {
    const int b = parse_byte_token(t);
    if (b >= 0) {
      bytes += static_cast<char>(b);
      ++count;
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  return out;
}

// Splits valid UTF-8 into its characters.
std::vector<std::string_view> chars_of(const std::string& s) {
  std::vector<std::string_view> cs;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8::char_len(s, i);
    cs.push_back(std::string_view(s).substr(i, n ? n : 1));
    i += n ? n : 1;
  }
  return cs;
}

}  // namespace

// A Strip step on one string: up to `start` leading and `stop` trailing copies of its character.
std::string Decoder::strip(const std::string& t, const Step& s) {
  const auto cs = chars_of(t);
  size_t b = 0, e = cs.size();
  while (b < s.start && b < cs.size() && cs[b] == s.content) ++b;
  for (size_t k = 0; k < s.stop && e > b && cs[e - 1] == s.content; ++k) --e;
  std::string r;
  for (size_t k = b; k < e; ++k) r += cs[k];
  return r;
}

Decoder::~Decoder() = default;

std::unique_ptr<Decoder> Decoder::load(const tok::json& j, const std::string& where) {
  auto d = std::unique_ptr<Decoder>(new Decoder);
  if (j.is_null())
    d->none_ = true;
  else
    d->add(j, where);
  return d;
}

void Decoder::add(const tok::json& j, const std::string& where) {
  const std::string type = tok::string_field(j, "type", where);
  auto s = std::make_unique<Step>();
  if (type == "Sequence") {
    const auto& list = tok::array_field(j, "decoders", where);
    for (size_t i = 0; i < list.size(); ++i)
      add(list[i], where + ".decoders[" + std::to_string(i) + "]");
    return;
  } else if (type == "ByteLevel") {
    s->kind = Step::kByteLevel;
  } else if (type == "Replace") {
    s->kind = Step::kReplace;
    std::string literal;
    tok::pattern_field(j, "pattern", where, &literal);
    if (!tok::optional(tok::required(j, "pattern", where), "String"))
      fail(tok::sub(where, "pattern"), ": only String patterns are supported in decoders");
    s->from = literal;
    s->to = tok::string_field(j, "content", where);
  } else if (type == "ByteFallback") {
    s->kind = Step::kByteFallback;
  } else if (type == "Fuse") {
    s->kind = Step::kFuse;
  } else if (type == "Strip") {
    s->kind = Step::kStrip;
    s->content = tok::string_field(j, "content", where);
    if (utf8::char_len(s->content, 0) != s->content.size() || s->content.empty())
      fail(tok::sub(where, "content"), ": expected exactly one character");
    const int64_t a = tok::int_field(j, "start", where), b = tok::int_field(j, "stop", where);
    if (a < 0 || b < 0) fail(where, ": start and stop must be non-negative");
    s->start = static_cast<size_t>(a);
    s->stop = static_cast<size_t>(b);
  } else if (type == "Metaspace") {
    s->kind = Step::kMetaspace;
    s->replacement = tok::string_or(j, "replacement", where, "\xE2\x96\x81");
    const std::string scheme = tok::string_or(
        j, "prepend_scheme", where,
        tok::bool_or(j, "add_prefix_space", where, true) ? "always" : "never");
    s->prepend = scheme != "never";
  } else {
    fail(tok::sub(where, "type"), ": unsupported decoder \"", type,
         "\" (supported: Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace)");
  }
  steps_.push_back(std::move(s));
}

bool Decoder::has_byte_fallback() const {
  for (const auto& s : steps_)
    if (s->kind == Step::kByteFallback) return true;
  return false;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (none_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  for (const auto& s : steps_) {
    switch (s->kind) {
      case Step::kByteLevel: {
        // All tokens become one byte string, read as UTF-8 with U+FFFD for bad sequences.
        std::string bytes;
        for (const auto& t : tokens)
          if (!byte_level::decode_token(t, bytes)) bytes += t;
        tokens.assign(1, utf8::sanitize(bytes));
        break;
      }
      case Step::kReplace:
        for (auto& t : tokens) t = replace_all(t, s->from, s->to);
        break;
      case Step::kByteFallback:
        tokens = byte_fallback(std::move(tokens));
        break;
      case Step::kFuse: {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case Step::kStrip:
        for (auto& t : tokens) t = strip(t, *s);
        break;
      case Step::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          // The reference drops every replacement character of the first token (not only a
          // leading one) when a prefix was prepended at encode time.
          tokens[i] = replace_all(tokens[i], s->replacement, i == 0 && s->prepend ? "" : " ");
        }
        break;
    }
  }
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::string Decoder::token_bytes(std::string t) const {
  if (none_) return " " + t;
  bool fused = false;  // after a step that joined the tokens into one text
  for (const auto& s : steps_) {
    switch (s->kind) {
      case Step::kByteLevel: {
        std::string bytes;
        if (!byte_level::decode_token(t, bytes)) bytes = t;
        t = std::move(bytes);
        fused = true;
        break;
      }
      case Step::kReplace:
        t = replace_all(t, s->from, s->to);
        break;
      case Step::kByteFallback:
        if (const int b = parse_byte_token(t); b >= 0) t.assign(1, static_cast<char>(b));
        break;
      case Step::kFuse:
        fused = true;
        break;
      case Step::kStrip:
        // Before fusion a Strip trims every token; after it, only the whole text's ends, which a
        // token in the middle of the text does not touch.
        if (!fused) t = strip(t, *s);
        break;
      case Step::kMetaspace:
        t = replace_all(t, s->replacement, " ");
        break;
    }
  }
  return t;
}

}  // namespace lockstep
