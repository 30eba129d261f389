#include "tokenizer/byte_level.h"

#include "core/utf8.h"

namespace lockstep::byte_level {
namespace {

struct Tables {
  std::array<std::string, 256> to_char;
  std::array<int16_t, 324> to_byte;  // code point (< 0x144) -> byte, or -1
  Tables() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp = printable ? static_cast<char32_t>(b) : 256 + extra++;
      utf8::append(to_char[b], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::array<std::string, 256>& byte_to_char() { return tables().to_char; }

std::string encode(std::string_view text) {
  const auto& t = tables().to_char;
  std::string out;
  out.reserve(text.size() * 2);
  for (unsigned char c : text) out += t[c];
  return out;
}

bool decode_token(std::string_view token, std::string& out) {
  const auto& t = tables().to_byte;
  const size_t mark = out.size();
  for (size_t i = 0; i < token.size();) {
    const char32_t cp = utf8::next(token, i);
    if (cp >= t.size() || t[cp] < 0) {
      out.resize(mark);
      return false;
    }
    out += static_cast<char>(t[cp]);
  }
  return true;
}

}  // namespace lockstep::byte_level
