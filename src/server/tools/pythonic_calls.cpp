#include "server/tools/pythonic_calls.h"

#include <cstdint>
#include <string>

#include "core/utf8.h"

namespace lockstep::server::tools {

namespace {

// As for JSON calls (call_text.cpp): model text must not nest without bound.
constexpr int kMaxDepth = 64;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

// A recursive-descent reader over the text; every method returns false on malformed input and
// leaves the position wherever it stopped (the whole parse then fails).
class Reader {
 public:
  explicit Reader(std::string_view text) : t_(text) {}

  bool calls(std::vector<ToolCall>& out) {
    if (!take('[')) return false;
    while (!peek(']')) {
      ToolCall c;
      if (!call(c)) return false;
      out.push_back(std::move(c));
      if (!take(',')) break;
    }
    return take(']') && at_end() && !out.empty();
  }

 private:
  void skip_space() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\r' || t_[p_] == '\n')) ++p_;
  }
  bool peek(char c) {
    skip_space();
    return p_ < t_.size() && t_[p_] == c;
  }
  bool take(char c) {
    if (!peek(c)) return false;
    ++p_;
    return true;
  }
  bool at_end() {
    skip_space();
    return p_ == t_.size();
  }
  std::string name() {
    skip_space();
    const size_t from = p_;
    while (p_ < t_.size() && is_name_char(t_[p_])) ++p_;
    return std::string(t_.substr(from, p_ - from));
  }

  bool call(ToolCall& c) {
    c.name = name();
    if (c.name.empty() || !take('(')) return false;
    Json args = Json::object();
    while (!peek(')')) {
      const std::string key = name();
      Json v;
      if (key.empty() || !take('=') || !value(v, 1) || args.contains(key)) return false;
      args[key] = std::move(v);
      if (!take(',')) break;
    }
    if (!take(')')) return false;
    c.arguments = args.dump();
    return true;
  }

  bool value(Json& v, int depth) {
    if (depth > kMaxDepth) return false;
    skip_space();
    if (p_ >= t_.size()) return false;
    const char c = t_[p_];
    if (c == '"' || c == '\'') {
      std::string s;
      if (!string(s)) return false;
      v = std::move(s);
      return true;
    }
    if (c == '[' || c == '(') return sequence(v, c == '[' ? ']' : ')', depth);
    if (c == '{') return dict(v, depth);
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) return number(v);
    const std::string word = name();
    if (word == "True" || word == "true") v = true;
    else if (word == "False" || word == "false") v = false;
    else if (word == "None" || word == "null") v = nullptr;
    else return false;
    return true;
  }

  bool sequence(Json& v, char close, int depth) {
    ++p_;
    v = Json::array();
    while (!peek(close)) {
      Json item;
      if (!value(item, depth + 1)) return false;
      v.push_back(std::move(item));
      if (!take(',')) break;
    }
    return take(close);
  }

  bool dict(Json& v, int depth) {
    ++p_;
    v = Json::object();
    while (!peek('}')) {
      std::string key;
      Json item;
      skip_space();
      if (p_ >= t_.size() || (t_[p_] != '"' && t_[p_] != '\'') || !string(key) || !take(':') ||
          !value(item, depth + 1) || v.contains(key))
        return false;
      v[key] = std::move(item);
      if (!take(',')) break;
    }
    return take('}');
  }

  bool number(Json& v) {
    const size_t from = p_;
    if (t_[p_] == '-' || t_[p_] == '+') ++p_;
    while (p_ < t_.size() && ((t_[p_] >= '0' && t_[p_] <= '9') || t_[p_] == '.' || t_[p_] == 'e' || t_[p_] == 'E' ||
                              ((t_[p_] == '-' || t_[p_] == '+') && (t_[p_ - 1] == 'e' || t_[p_ - 1] == 'E'))))
      ++p_;
    std::string text(t_.substr(from, p_ - from));
    if (text[0] == '+') text.erase(0, 1);
    // JSON's number syntax is Python's without its extras (1., .5, 1_000, 0x1F): those are refused.
    const Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_number()) return false;
    v = parsed;
    return true;
  }

  bool hex(size_t digits, uint32_t& out) {
    out = 0;
    for (size_t i = 0; i < digits; ++i, ++p_) {
      if (p_ >= t_.size()) return false;
      const char h = t_[p_];
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) return false;
      out = out * 16 + static_cast<uint32_t>(d);
    }
    return true;
  }

  bool string(std::string& out) {
    const char quote = t_[p_++];
    while (p_ < t_.size()) {
      const char c = t_[p_++];
      if (c == quote) return true;
      if (c == '\n') return false;  // a plain string literal does not span lines
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p_ >= t_.size()) return false;
      const char e = t_[p_++];
      uint32_t cp = 0;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case '0': out += '\0'; break;
        case '\\': case '\'': case '"': out += e; break;
        case 'x': if (!hex(2, cp)) return false; utf8::append(out, static_cast<char32_t>(cp)); break;
        case 'u': if (!hex(4, cp)) return false; [[fallthrough]];
        case 'U':
          if (e == 'U' && !hex(8, cp)) return false;
          if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;  // not a character
          utf8::append(out, static_cast<char32_t>(cp));
          break;
        default: out += '\\'; out += e;  // Python keeps unknown escapes as written
      }
    }
    return false;
  }

  std::string_view t_;
  size_t p_ = 0;
};

}  // namespace

std::optional<std::vector<ToolCall>> parse_pythonic_calls(std::string_view text) {
  std::vector<ToolCall> calls;
  Reader r(text);
  if (!r.calls(calls)) return std::nullopt;
  return calls;
}

}  // namespace lockstep::server::tools
