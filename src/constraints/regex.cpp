// The regular-expression parser: recursive descent into grammar expressions.
#include "constraints/regex.h"

#include "core/error.h"
#include "core/utf8.h"

namespace lockstep::constraints {

namespace {

CodepointSet digit_set() { return CodepointSet::range('0', '9'); }

CodepointSet word_set() {
  CodepointSet s = CodepointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}

// ECMAScript WhiteSpace and LineTerminator.
CodepointSet space_set() {
  CodepointSet s = CodepointSet::range('\t', '\r');
  for (char32_t c : {U' ', U'\u00a0', U'\u1680', U'\u2028', U'\u2029', U'\u202f', U'\u205f',
                     U'\u3000', U'\ufeff'})
    s.add(c, c);
  s.add(0x2000, 0x200A);
  return s;
}

CodepointSet dot_set() {
  CodepointSet t;
  for (char32_t c : {U'\n', U'\r', U'\u2028', U'\u2029'}) t.add(c, c);
  return t.complement();
}

class RegexParser {
 public:
  RegexParser(std::string_view s, RegexAnchoring anchoring, const CharEncoder& encode)
      : s_(s), anchoring_(anchoring), encode_(encode) {}

  ExprPtr parse() {
    std::vector<ExprPtr> branches;
    for (;;) {
      const bool start = consume('^');
      ExprPtr body = parse_sequence(0);
      const bool end = end_anchor_;
      end_anchor_ = false;
      if (anchoring_ == RegexAnchoring::kSearch) {
        const ExprPtr any = repeat(encode_(CodepointSet::all_scalar_values()), 0, Expr::kUnbounded);
        body = seq({start ? empty() : any, body, end ? empty() : any});
      }
      branches.push_back(body);
      if (pos_ >= s_.size()) break;
      if (s_[pos_] == ')') error("unbalanced ')'");
      ++pos_;  // '|'
    }
    return alt(std::move(branches));
  }

 private:
  [[noreturn]] void error(const std::string& what, size_t at = SIZE_MAX) const {
    fail("regex at offset ", at == SIZE_MAX ? pos_ : at, ": ", what);
  }
  bool consume(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }

  ExprPtr parse_alternation(int depth) {
    std::vector<ExprPtr> branches{parse_sequence(depth)};
    while (consume('|')) branches.push_back(parse_sequence(depth));
    return alt(std::move(branches));
  }

  ExprPtr parse_sequence(int depth) {
    std::vector<ExprPtr> items;
    while (pos_ < s_.size() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        const size_t at = pos_++;
        if (depth == 0 && (pos_ == s_.size() || peek() == '|')) {
          end_anchor_ = true;
          break;
        }
        error("'$' is supported only at the end of a top-level alternative", at);
      }
      if (peek() == '^') error("'^' is supported only at the start of a top-level alternative");
      ExprPtr atom = parse_atom(depth);
      items.push_back(parse_quantifiers(std::move(atom)));
    }
    return seq(std::move(items));
  }

  ExprPtr parse_atom(int depth) {
    const size_t at = pos_;
    const char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      if (consume('?')) {
        if (consume(':')) {
        } else if (peek() == '<' && pos_ + 1 < s_.size() && s_[pos_ + 1] != '=' && s_[pos_ + 1] != '!') {
          while (pos_ < s_.size() && s_[pos_] != '>') ++pos_;
          if (!consume('>')) error("unterminated group name", at);
        } else {
          error("lookaround and other (? groups are not supported", at);
        }
      }
      ExprPtr inner = parse_alternation(depth + 1);
      if (!consume(')')) error("'(' without ')'", at);
      return inner;
    }
    if (c == '[') return encode_(parse_class());
    if (c == '.') {
      ++pos_;
      return encode_(dot_set());
    }
    if (c == '*' || c == '+' || c == '?') error(std::string("nothing to repeat before '") + c + "'");
    if (c == '{' && quantifier_at(pos_)) error("nothing to repeat before '{'");
    if (c == '\\') return encode_(parse_escape(false));
    return encode_(CodepointSet::single(literal_char()));
  }

  char32_t literal_char() {
    const size_t n = utf8::char_len(s_, pos_);
    if (n == 0) error("invalid UTF-8");
    size_t i = pos_;
    const char32_t cp = utf8::next(s_, i);
    pos_ = i;
    return cp;
  }

  // Whether a {m}, {m,} or {m,n} quantifier starts at `p` (otherwise '{' is a literal).
  bool quantifier_at(size_t p) const {
    if (p >= s_.size() || s_[p] != '{') return false;
    ++p;
    size_t digits = 0;
    while (p < s_.size() && s_[p] >= '0' && s_[p] <= '9') ++p, ++digits;
    if (!digits) return false;
    if (p < s_.size() && s_[p] == ',') {
      ++p;
      while (p < s_.size() && s_[p] >= '0' && s_[p] <= '9') ++p;
    }
    return p < s_.size() && s_[p] == '}';
  }

  uint32_t number() {
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > 100000) error("repetition count above 100000");
      ++pos_;
    }
    return static_cast<uint32_t>(v);
  }

  ExprPtr parse_quantifiers(ExprPtr atom) {
    for (;;) {
      uint32_t lo, hi;
      const char c = peek();
      if (c == '*') {
        lo = 0, hi = Expr::kUnbounded, ++pos_;
      } else if (c == '+') {
        lo = 1, hi = Expr::kUnbounded, ++pos_;
      } else if (c == '?') {
        lo = 0, hi = 1, ++pos_;
      } else if (c == '{' && quantifier_at(pos_)) {
        ++pos_;
        lo = hi = number();
        if (consume(',')) hi = peek() == '}' ? Expr::kUnbounded : number();
        ++pos_;  // '}'
        if (hi < lo) error("numbers out of order in {} quantifier");
      } else {
        return atom;
      }
      consume('?');  // lazy: the same language
      atom = repeat(std::move(atom), lo, hi);
    }
  }

  // An escape at pos_ ('\\'); in a class, \b is a backspace.
  CodepointSet parse_escape(bool in_class) {
    const size_t at = pos_++;
    if (pos_ >= s_.size()) error("'\\' at the end of the pattern", at);
    const char e = s_[pos_++];
    switch (e) {
      case 'd': return digit_set();
      case 'D': return digit_set().complement();
      case 'w': return word_set();
      case 'W': return word_set().complement();
      case 's': return space_set();
      case 'S': return space_set().complement();
      case 'n': return CodepointSet::single('\n');
      case 'r': return CodepointSet::single('\r');
      case 't': return CodepointSet::single('\t');
      case 'f': return CodepointSet::single('\f');
      case 'v': return CodepointSet::single('\v');
      case '0': return CodepointSet::single(0);
      case 'x': return CodepointSet::single(hex(2, at));
      case 'u':
        if (consume('{')) {
          char32_t v = 0;
          size_t digits = 0;
          while (peek() != '}' && pos_ < s_.size()) v = v * 16 + hex(1, at), ++digits;
          if (!consume('}') || !digits || v > 0x10FFFF) error("malformed \\u{...}", at);
          return CodepointSet::single(v);
        }
        return CodepointSet::single(hex(4, at));
      case 'b':
        if (in_class) return CodepointSet::single('\b');
        error("word boundaries (\\b) are not supported", at);
      case 'B': error("word boundaries (\\B) are not supported", at);
      default:
        if (e >= '1' && e <= '9') error("backreferences are not supported", at);
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z'))
          error(std::string("unknown escape \\") + e, at);
        --pos_;
        return CodepointSet::single(literal_char());
    }
  }

  char32_t hex(int digits, size_t at) {
    char32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      const int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) error("malformed hex escape", at);
      v = v * 16 + static_cast<char32_t>(d);
      ++pos_;
    }
    return v;
  }

  CodepointSet parse_class() {
    const size_t open = pos_++;
    const bool negated = consume('^');
    CodepointSet set;
    while (pos_ < s_.size() && s_[pos_] != ']') {
      CodepointSet lo_set = class_atom();
      if (peek() == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
        const size_t dash = pos_++;
        CodepointSet hi_set = class_atom();
        if (lo_set.ranges().size() != 1 || hi_set.ranges().size() != 1 ||
            lo_set.ranges()[0].first != lo_set.ranges()[0].second ||
            hi_set.ranges()[0].first != hi_set.ranges()[0].second)
          error("a class range needs single characters at both ends", dash);
        const char32_t lo = lo_set.ranges()[0].first, hi = hi_set.ranges()[0].first;
        if (hi < lo) error("class range out of order", dash);
        set.add(lo, hi);
      } else {
        set.add(lo_set);
      }
    }
    if (!consume(']')) error("'[' without ']'", open);
    return negated ? set.complement() : set;
  }

  CodepointSet class_atom() {
    if (peek() == '\\') return parse_escape(true);
    return CodepointSet::single(literal_char());
  }

  std::string_view s_;
  RegexAnchoring anchoring_;
  const CharEncoder& encode_;
  size_t pos_ = 0;
  bool end_anchor_ = false;
};

}  // namespace

ExprPtr regex_expr(std::string_view pattern, RegexAnchoring anchoring, const CharEncoder& encode) {
  return RegexParser(pattern, anchoring, encode).parse();
}

Grammar compile_regex(std::string_view pattern) {
  GrammarBuilder b;
  const uint32_t root = b.add_rule("root");
  b.define(root, regex_expr(pattern, RegexAnchoring::kFullMatch,
                            [](const CodepointSet& s) { return codepoints(s); }));
  return b.build(root);
}

}  // namespace lockstep::constraints
