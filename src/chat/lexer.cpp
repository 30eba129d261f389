#include "chat/lexer.h"

#include <cstring>

#include "chat/text.h"
#include "core/error.h"

namespace lockstep::chat {

std::string location(int line, int column) {
  return "chat template line " + std::to_string(line) + ", column " + std::to_string(column) + ": ";
}

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

class Lexer {
 public:
  Lexer(std::string src, const LexOptions& o) : s_(std::move(src)), opt_(o) {}

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;  // the previous tag ended a line (Jinja2's lstrip_blocks rule)
    bool strip_next = false;    // the previous tag ended with '-': drop leading whitespace
    while (pos <= s_.size()) {
      size_t tag = find_tag(pos);
      std::string data = s_.substr(pos, (tag == std::string::npos ? s_.size() : tag) - pos);
      if (strip_next) data = text::strip(data, nullptr, true, false);
      if (tag == std::string::npos) {
        emit_data(data, pos);
        break;
      }
      const char kind = s_[tag + 1];  // '{', '%' or '#'
      const char sign = tag + 2 < s_.size() ? s_[tag + 2] : 0;
      if (sign == '-') {
        data = text::strip(data, nullptr, false, true);
      } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
        // Spaces/tabs alone between a line start and a block/comment tag are dropped.
        const size_t nl = data.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < data.size() &&
            text::strip(data.substr(l_pos), nullptr, true, true).empty())
          data.resize(l_pos);
      }
      emit_data(data, pos);
      const size_t body = tag + 2 + (sign == '-' || sign == '+');
      size_t end;
      if (kind == '#') {
        end = comment(tag, body);
      } else if (kind == '%' && raw_block(tag, body, &end)) {
      } else {
        end = tag_tokens(tag, body, kind == '{');
      }
      // `end` is just past the closing marker; apply the closing whitespace control.
      const char close_sign = s_[end - 3];
      const bool block_like = kind != '{';
      if (close_sign == '-') {
        strip_next = true;
      } else {
        strip_next = false;
        if (block_like && close_sign != '+' && opt_.trim_blocks && end < s_.size() && s_[end] == '\n')
          ++end;
      }
      line_starting = s_[end - 1] == '\n';
      if (strip_next) {
        // Jinja2's `-%}\s*` consumes the whitespace as part of the tag: the line-start state
        // depends on what was consumed.
        size_t e = end;
        while (e < s_.size() && is_ws(s_[e])) ++e;
        line_starting = e > end ? s_[e - 1] == '\n' : line_starting;
      }
      pos = end;
    }
    Token t;
    t.type = TokenType::End;
    set_pos(t, s_.size());
    out_.push_back(t);
    return std::move(out_);
  }

  // Normalises newlines like Jinja2 before any lexing.
  static std::string normalise(const std::string& src) {
    std::string out;
    out.reserve(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i] == '\r') {
        out += '\n';
        if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      } else {
        out += src[i];
      }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = s_.find('{', from); i != std::string::npos; i = s_.find('{', i + 1)) {
      if (i + 1 < s_.size() && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  [[noreturn]] void error(size_t at, const std::string& msg) const {
    int line = 1, col = 1;
    position(at, &line, &col);
    throw Error(location(line, col) + msg);
  }

  void position(size_t at, int* line, int* col) const {
    // Tokens are produced in order, so a forward-moving cursor keeps this linear overall.
    if (at < cursor_) cursor_ = 0, cur_line_ = 1, cur_col_ = 1;
    for (; cursor_ < at && cursor_ < s_.size(); ++cursor_) {
      if (s_[cursor_] == '\n') ++cur_line_, cur_col_ = 1;
      else if ((static_cast<unsigned char>(s_[cursor_]) & 0xC0) != 0x80) ++cur_col_;
    }
    *line = cur_line_;
    *col = cur_col_;
  }

  void set_pos(Token& t, size_t at) const { position(at, &t.line, &t.column); }

  void emit_data(const std::string& data, size_t at) {
    if (data.empty()) return;
    Token t;
    t.type = TokenType::Data;
    t.text = data;
    set_pos(t, at);
    out_.push_back(std::move(t));
  }

  size_t comment(size_t tag, size_t body) {
    const size_t close = s_.find("#}", body);
    if (close == std::string::npos) error(tag, "unterminated comment (missing '#}')");
    return close + 2;
  }

  // {% raw %}...{% endraw %}: the body is data, not parsed.
  bool raw_block(size_t tag, size_t body, size_t* end) {
    size_t p = body;
    while (p < s_.size() && is_ws(s_[p])) ++p;
    if (s_.compare(p, 3, "raw") != 0 || (p + 3 < s_.size() && is_name_char(s_[p + 3]))) return false;
    p += 3;
    while (p < s_.size() && is_ws(s_[p])) ++p;
    const bool strip_after = p < s_.size() && s_[p] == '-';
    if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ++p;
    if (s_.compare(p, 2, "%}") != 0) return false;
    const size_t content = p + 2;
    for (size_t q = s_.find("{%", content); q != std::string::npos; q = s_.find("{%", q + 1)) {
      size_t r = q + 2;
      const bool strip_before = r < s_.size() && s_[r] == '-';
      if (r < s_.size() && (s_[r] == '-' || s_[r] == '+')) ++r;
      while (r < s_.size() && is_ws(s_[r])) ++r;
      if (s_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < s_.size() && is_ws(s_[r])) ++r;
      if (r < s_.size() && (s_[r] == '-' || s_[r] == '+')) ++r;
      if (s_.compare(r, 2, "%}") != 0) continue;
      std::string data = s_.substr(content, q - content);
      if (strip_after) data = text::strip(data, nullptr, true, false);
      if (strip_before) data = text::strip(data, nullptr, false, true);
      emit_data(data, content);
      *end = r + 2;
      return true;
    }
    error(tag, "unterminated raw block (missing '{% endraw %}')");
  }

  // Tokens of a {{ ... }} or {% ... %} tag; returns the offset just past its closing marker.
  size_t tag_tokens(size_t tag, size_t p, bool variable) {
    Token begin;
    begin.type = variable ? TokenType::VarBegin : TokenType::BlockBegin;
    set_pos(begin, tag);
    out_.push_back(begin);
    const char closer = variable ? '}' : '%';
    int depth = 0;  // open brackets: a '}}' inside a dict literal does not end the tag
    while (true) {
      while (p < s_.size() && is_ws(s_[p])) ++p;
      if (p >= s_.size()) error(tag, std::string("unterminated tag (missing '") + closer + "}')");
      if (depth == 0) {
        size_t m = p;
        if ((s_[m] == '-' || s_[m] == '+') && m + 1 < s_.size() && s_[m + 1] == closer) ++m;
        if (s_[m] == closer && m + 1 < s_.size() && s_[m + 1] == '}') {
          Token t;
          t.type = variable ? TokenType::VarEnd : TokenType::BlockEnd;
          set_pos(t, p);
          out_.push_back(t);
          // The marker is always 3 bytes before the returned offset for the sign check: pad with
          // a plain closer when there is no sign.
          return m + 2;
        }
      }
      Token t;
      set_pos(t, p);
      const char c = s_[p];
      if (is_name_start(c)) {
        size_t e = p;
        while (e < s_.size() && is_name_char(s_[e])) ++e;
        t.type = TokenType::Name;
        t.text = s_.substr(p, e - p);
        p = e;
      } else if (c == '\'' || c == '"') {
        p = string_literal(p, &t);
      } else if (is_digit(c)) {
        p = number(p, &t);
      } else {
        static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
                                     "~",  "[",  "]",  "(",  ")",  "{",  "}", "<", ">", "=", ".",
                                     ":",  "|",  ",",  ";"};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (s_.compare(p, std::strlen(o), o) == 0) {
            op = o;
            break;
          }
        }
        if (!op) error(p, std::string("unexpected character '") + c + "'");
        t.type = TokenType::Operator;
        t.text = op;
        p += t.text.size();
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      }
      out_.push_back(std::move(t));
    }
  }

  size_t string_literal(size_t p, Token* t) {
    const char q = s_[p];
    std::string v;
    size_t i = p + 1;
    for (; i < s_.size() && s_[i] != q; ++i) {
      if (s_[i] != '\\') {
        v += s_[i];
        continue;
      }
      if (++i >= s_.size()) break;
      const char e = s_[i];
      // Python's unicode-escape codec, which Jinja2 applies to string literals.
      switch (e) {
        case 'n': v += '\n'; break;
        case 't': v += '\t'; break;
        case 'r': v += '\r'; break;
        case 'a': v += '\a'; break;
        case 'b': v += '\b'; break;
        case 'f': v += '\f'; break;
        case 'v': v += '\v'; break;
        case '\\': v += '\\'; break;
        case '\'': v += '\''; break;
        case '"': v += '"'; break;
        case '\n': break;  // line continuation
        case 'x': case 'u': case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 1; k <= n; ++k) {
            const char h = i + k < s_.size() ? s_[i + k] : 0;
            const int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                                                : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) error(i - 1, std::string("truncated \\") + e + " escape in string literal");
            cp = cp * 16 + uint32_t(d);
          }
          text::append_utf8(v, cp);
          i += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = 0;
            size_t k = 0;
            for (; k < 3 && i + k < s_.size() && s_[i + k] >= '0' && s_[i + k] <= '7'; ++k)
              cp = cp * 8 + uint32_t(s_[i + k] - '0');
            text::append_utf8(v, cp);
            i += k - 1;
          } else {
            v += '\\';  // unknown escapes keep their backslash, as in Python
            v += e;
          }
      }
    }
    if (i >= s_.size()) error(p, "unterminated string literal");
    t->type = TokenType::String;
    t->text = std::move(v);
    return i + 1;
  }

  size_t number(size_t p, Token* t) {
    // 0b / 0o / 0x integers (Python's forms, underscores allowed).
    if (s_[p] == '0' && p + 1 < s_.size() && std::strchr("bBoOxX", s_[p + 1]) && s_[p + 1] != 0) {
      const int base = (s_[p + 1] | 32) == 'b' ? 2 : (s_[p + 1] | 32) == 'o' ? 8 : 16;
      size_t e = p + 2;
      std::string digits;
      for (; e < s_.size(); ++e) {
        const char c = static_cast<char>(s_[e] | 32);
        const int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : s_[e] == '_' ? -2 : -1;
        if (d == -2) continue;
        if (d < 0 || d >= base) break;
        digits += s_[e];
      }
      if (!digits.empty()) {
        t->type = TokenType::Integer;
        t->text = s_.substr(p, e - p);
        try {
          t->int_value = std::stoll(digits, nullptr, base);
        } catch (const std::exception&) {
          error(p, "integer literal out of range: " + t->text);
        }
        return e;
      }
    }
    auto digits = [&](size_t i) {
      while (i < s_.size() && (is_digit(s_[i]) || (s_[i] == '_' && i + 1 < s_.size() && is_digit(s_[i + 1]))))
        ++i;
      return i;
    };
    size_t e = digits(p);
    bool is_float = false;
    // A float may not follow '.', so `messages.0.content` is two subscripts, not 0.0.
    const bool after_dot = !out_.empty() && out_.back().type == TokenType::Operator && out_.back().text == ".";
    if (!after_dot && e + 1 < s_.size() && s_[e] == '.' && is_digit(s_[e + 1])) {
      e = digits(e + 1);
      is_float = true;
    }
    if (!after_dot && e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      size_t x = e + 1;
      if (x < s_.size() && (s_[x] == '+' || s_[x] == '-')) ++x;
      if (x < s_.size() && is_digit(s_[x])) {
        e = digits(x);
        is_float = true;
      }
    }
    std::string lit;
    for (size_t i = p; i < e; ++i)
      if (s_[i] != '_') lit += s_[i];
    t->text = lit;
    if (is_float) {
      t->type = TokenType::Float;
      t->float_value = std::stod(lit);
    } else {
      t->type = TokenType::Integer;
      try {
        t->int_value = std::stoll(lit);
      } catch (const std::exception&) {
        error(p, "integer literal out of range: " + lit);
      }
    }
    return e;
  }

  std::string s_;
  LexOptions opt_;
  std::vector<Token> out_;
  mutable size_t cursor_ = 0;
  mutable int cur_line_ = 1, cur_col_ = 1;
};

}  // namespace

std::vector<Token> lex(const std::string& source, const LexOptions& options) {
  return Lexer(Lexer::normalise(source), options).run();
}

}  // namespace lockstep::chat
