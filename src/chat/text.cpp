#include "chat/text.h"

#include "core/utf8.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace lockstep::chat::text {

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size(); ++i) {
    // Continuation bytes (10xxxxxx) never start a code point; invalid UTF-8 counts byte by byte.
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  }
  out.push_back(s.size());
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<uint32_t> decode(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (i + len > s.size()) len = 1;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) { utf8::append(out, static_cast<char32_t>(cp)); }

bool is_space(uint32_t cp) {
  // Python's str.isspace(): bidirectional class WS/B/S or category Zs.
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string strip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::vector<uint32_t> set = chars ? decode(*chars) : std::vector<uint32_t>{};
  auto strippable = [&](uint32_t cp) {
    if (!chars) return is_space(cp);
    for (uint32_t c : set)
      if (c == cp) return true;
    return false;
  };
  const std::vector<size_t> at = code_point_offsets(s);
  const std::vector<uint32_t> cps = decode(s);
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strippable(cps[b])) ++b;
  if (right)
    while (e > b && strippable(cps[e - 1])) --e;
  return std::string(s.substr(at[b], at[e] - at[b]));
}

namespace {

// Whitespace-separated fields with their byte ranges, for split()/rsplit() without a separator.
std::vector<std::pair<size_t, size_t>> fields(std::string_view s) {
  std::vector<std::pair<size_t, size_t>> out;
  const std::vector<size_t> at = code_point_offsets(s);
  const std::vector<uint32_t> cps = decode(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_space(cps[i])) ++i;
    if (i == cps.size()) break;
    size_t j = i;
    while (j < cps.size() && !is_space(cps[j])) ++j;
    out.emplace_back(at[i], at[j]);
    i = j;
  }
  return out;
}

}  // namespace

std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep) {
    const auto f = fields(s);
    for (size_t k = 0; k < f.size(); ++k) {
      if (maxsplit >= 0 && int64_t(k) == maxsplit) {
        // The rest of the string, with only its leading whitespace removed.
        out.push_back(strip(s.substr(f[k].first), nullptr, true, false));
        return out;
      }
      out.emplace_back(s.substr(f[k].first, f[k].second - f[k].first));
    }
    return out;
  }
  size_t pos = 0;
  for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
    const size_t hit = s.find(*sep, pos);
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep->size();
  }
  out.emplace_back(s.substr(pos));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, -1);
  std::vector<std::string> rev;
  if (!sep) {
    const auto f = fields(s);
    int64_t n = 0;
    size_t k = f.size();
    for (; k > 0 && n < maxsplit; --k, ++n)
      rev.emplace_back(s.substr(f[k - 1].first, f[k - 1].second - f[k - 1].first));
    if (k > 0) rev.push_back(strip(s.substr(0, f[k - 1].second), nullptr, false, true));
  } else {
    size_t end = s.size();
    for (int64_t n = 0; n < maxsplit; ++n) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      rev.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    rev.emplace_back(s.substr(0, end));
  }
  return std::vector<std::string>(rev.rbegin(), rev.rend());
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` between every code point (and at both ends).
    const std::vector<size_t> at = code_point_offsets(s);
    int64_t n = 0;
    for (size_t k = 0; k + 1 < at.size(); ++k) {
      if (count < 0 || n++ < count) out += to;
      out += s.substr(at[k], at[k + 1] - at[k]);
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  size_t pos = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out += s.substr(pos, hit - pos);
    out += to;
    pos = hit + from.size();
  }
  out += s.substr(pos);
  return out;
}

namespace {

// Simple (one-to-one) case mappings for the scripts chat text commonly uses: ASCII, Latin-1,
// Latin Extended-A, Greek, Cyrillic and fullwidth Latin. Python uses the full Unicode tables;
// outside these ranges we leave characters unchanged.
uint32_t to_lower(uint32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c | 1;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 0x25;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 0x3F;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 0x20;
  return c;
}

uint32_t to_upper(uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 0x20;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c & ~1u;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c : c - 1;
  if (c == 0x131) return 'I';
  if (c == 0x17F) return 'S';
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 0x20;
  if (c == 0x3C2) return 0x3A3;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 0x25;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 0x3F;
  if (c >= 0x430 && c <= 0x44F) return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 0x20;
  return c;
}

bool cased(uint32_t c) { return c == 0xDF || to_lower(c) != c || to_upper(c) != c; }

// Upper-cases one code point into `out`; ß becomes "SS" as in Python.
void put_upper(std::string& out, uint32_t c) {
  if (c == 0xDF) out += "SS";
  else append_utf8(out, to_upper(c));
}

}  // namespace

std::string lower(std::string_view s) {
  std::string out;
  for (uint32_t c : decode(s)) append_utf8(out, to_lower(c));
  return out;
}

std::string upper(std::string_view s) {
  std::string out;
  for (uint32_t c : decode(s)) put_upper(out, c);
  return out;
}

std::string title(std::string_view s) {
  // Python str.title(): a cased character after an uncased one starts a word.
  std::string out;
  bool prev_cased = false;
  for (uint32_t c : decode(s)) {
    if (prev_cased) append_utf8(out, to_lower(c));
    else put_upper(out, c);
    prev_cased = cased(c);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (uint32_t c : decode(s)) {
    if (first) put_upper(out, c);
    else append_utf8(out, to_lower(c));
    first = false;
  }
  return out;
}

std::vector<std::string> split_lines(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n' && s[i] != '\r') continue;
    out.emplace_back(s.substr(start, i - start));
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  // Shortest round-trip digits (what Python's repr uses), then Python's layout: positional for
  // decimal exponents in [-4, 16), scientific otherwise.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0.";
      out.append(size_t(-exp - 1), '0');
      out += digits;
    } else if (size_t(exp) + 1 >= digits.size()) {
      out += digits;
      out.append(size_t(exp) + 1 - digits.size(), '0');
      out += ".0";
    } else {
      out.append(digits, 0, size_t(exp) + 1);
      out += '.';
      out.append(digits, size_t(exp) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1);
  }
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + ebuf;
}

namespace {

// Python's str.isprintable() is false for categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs other than
// space; these are the ones that occur in practice (no full Unicode database here).
bool printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F)) return false;
  if ((cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF) return false;
  if ((cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFFF9 || cp == 0xFFFA || cp == 0xFFFB) return false;
  return cp < 0xF0000;
}

}  // namespace

std::string string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (uint32_t cp : decode(s)) {
    char buf[16];
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (printable(cp)) {
      append_utf8(out, cp);
    } else {
      if (cp < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", cp);
      else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      else std::snprintf(buf, sizeof buf, "\\U%08x", cp);
      out += buf;
    }
  }
  out += quote;
  return out;
}

}  // namespace lockstep::chat::text
