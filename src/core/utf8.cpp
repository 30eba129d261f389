#include "core/utf8.h"

namespace lockstep::utf8 {
namespace {

// Length of the maximal prefix of a well-formed sequence at s[i] (>= 1 when the lead byte could
// start a character and the following bytes fit so far), and whether it is complete.
struct Scan {
  size_t len;     // bytes consumed: a complete char, or the maximal subpart of an invalid one
  bool complete;  // true when those bytes form a whole character
};

Scan scan(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {1, true};
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {1, false};
  }
  size_t k = 1;
  for (; k <= need; ++k) {
    if (i + k >= s.size()) return {k, false};
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) return {k, false};
  }
  return {k, true};
}

}  // namespace

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const Scan sc = scan(s, i);
    if (sc.complete)
      out.append(s.substr(i, sc.len));
    else
      out.append("\xEF\xBF\xBD");
    i += sc.len;
  }
  return out;
}

bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const Scan sc = scan(s, i);
    if (!sc.complete) return false;
    i += sc.len;
  }
  return true;
}

size_t char_len(std::string_view s, size_t i) {
  const Scan sc = scan(s, i);
  return sc.complete ? sc.len : 0;
}

char32_t next(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  char32_t cp = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t incomplete_tail(std::string_view s) {
  // A character is at most 4 bytes, so only the last 3 bytes can start an unfinished one.
  const size_t from = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = from; i < s.size(); ++i) {
    const Scan sc = scan(s, i);
    if (!sc.complete && i + sc.len == s.size() && static_cast<unsigned char>(s[i]) >= 0xC2 &&
        static_cast<unsigned char>(s[i]) <= 0xF4)
      return s.size() - i;
  }
  return 0;
}

}  // namespace lockstep::utf8
