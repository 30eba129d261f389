#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "core/utf8.h"

namespace lockstep {

struct Normalizer::Step {
  enum Kind { kUnicode, kLowercase, kPrepend, kReplace, kStrip, kByteLevel } kind;
  utf8proc_option_t unicode_options{};
  std::string text;               // Prepend: prefix; Replace: replacement
  std::string literal;            // Replace with a String pattern: the literal searched for
  std::unique_ptr<Regex> regex;   // Replace with a Regex pattern
  bool strip_left = false, strip_right = false;
};

namespace {

void unicode_normalize(std::string& text, utf8proc_option_t options) {
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                              static_cast<utf8proc_ssize_t>(text.size()), &out, options);
  if (n < 0) fail("unicode normalization failed: ", utf8proc_errmsg(n));
  text.assign(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
}

void lowercase(std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();)
    utf8::append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(
                          utf8::next(text, i)))));
  text.swap(out);
}

bool is_white_space(char32_t c) {
  return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

void strip(std::string& text, bool left, bool right) {
  size_t b = 0, e = text.size();
  if (left) {
    while (b < e) {
      size_t i = b;
      if (!is_white_space(utf8::next(text, i))) break;
      b = i;
    }
  }
  if (right) {
    while (e > b) {
      size_t s = e - 1;
      while (s > b && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
      size_t i = s;
      if (!is_white_space(utf8::next(text, i))) break;
      e = s;
    }
  }
  text = text.substr(b, e - b);
}

void replace_literal(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = text.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(text, pos, hit - pos);
    out += to;
  }
  if (pos == 0) return;
  out.append(text, pos, std::string::npos);
  text.swap(out);
}

}  // namespace

Normalizer::~Normalizer() = default;

std::unique_ptr<Normalizer> Normalizer::load(const tok::json& j, const std::string& where) {
  auto n = std::unique_ptr<Normalizer>(new Normalizer);
  if (!j.is_null()) n->add(j, where);
  return n;
}

void Normalizer::add(const tok::json& j, const std::string& where) {
  const std::string type = tok::string_field(j, "type", where);
  auto step = std::make_unique<Step>();
  const auto base = static_cast<utf8proc_option_t>(UTF8PROC_STABLE);
  if (type == "Sequence") {
    const auto& list = tok::array_field(j, "normalizers", where);
    for (size_t i = 0; i < list.size(); ++i)
      add(list[i], where + ".normalizers[" + std::to_string(i) + "]");
    return;
  } else if (type == "NFC") {
    step->kind = Step::kUnicode;
    step->unicode_options = static_cast<utf8proc_option_t>(base | UTF8PROC_COMPOSE);
  } else if (type == "NFD") {
    step->kind = Step::kUnicode;
    step->unicode_options = static_cast<utf8proc_option_t>(base | UTF8PROC_DECOMPOSE);
  } else if (type == "NFKC") {
    step->kind = Step::kUnicode;
    step->unicode_options =
        static_cast<utf8proc_option_t>(base | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  } else if (type == "NFKD") {
    step->kind = Step::kUnicode;
    step->unicode_options =
        static_cast<utf8proc_option_t>(base | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  } else if (type == "Lowercase") {
    step->kind = Step::kLowercase;
  } else if (type == "Prepend") {
    step->kind = Step::kPrepend;
    step->text = tok::string_field(j, "prepend", where);
  } else if (type == "Replace") {
    step->kind = Step::kReplace;
    std::string literal;
    const std::string pattern = tok::pattern_field(j, "pattern", where, &literal);
    step->text = tok::string_field(j, "content", where);
    if (tok::optional(tok::required(j, "pattern", where), "String"))
      step->literal = literal;
    else
      step->regex = std::make_unique<Regex>(pattern, tok::sub(where, "pattern"));
  } else if (type == "Strip") {
    step->kind = Step::kStrip;
    step->strip_left = tok::bool_or(j, "strip_left", where, true);
    step->strip_right = tok::bool_or(j, "strip_right", where, true);
  } else if (type == "ByteLevel") {
    step->kind = Step::kByteLevel;
  } else {
    fail(tok::sub(where, "type"), ": unsupported normalizer \"", type,
         "\" (supported: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip, "
         "ByteLevel)");
  }
  steps_.push_back(std::move(step));
}

void Normalizer::apply(std::string& text) const {
  for (const auto& s : steps_) {
    switch (s->kind) {
      case Step::kUnicode:
        if (!text.empty()) unicode_normalize(text, s->unicode_options);
        break;
      case Step::kLowercase:
        lowercase(text);
        break;
      case Step::kPrepend:
        // The reference prepends only to non-empty text.
        if (!text.empty()) text = s->text + text;
        break;
      case Step::kReplace:
        if (s->regex) {
          std::string out;
          size_t pos = 0;
          for (auto [b, e] : s->regex->find_all(text)) {
            out.append(text, pos, b - pos);
            out += s->text;
            pos = e;
          }
          out.append(text, pos, std::string::npos);
          text.swap(out);
        } else {
          replace_literal(text, s->literal, s->text);
        }
        break;
      case Step::kStrip:
        strip(text, s->strip_left, s->strip_right);
        break;
      case Step::kByteLevel:
        text = byte_level::encode(text);
        break;
    }
  }
}

}  // namespace lockstep
