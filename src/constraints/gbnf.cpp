// The GBNF parser: recursive descent straight into expressions (expr.h).
#include "constraints/gbnf.h"

#include <map>
#include <string>

#include "core/error.h"
#include "core/utf8.h"

namespace lockstep::constraints {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : s_(text) {}

  Grammar parse() {
    skip_space();
    if (at_end()) error_at(pos_, "a rule (name ::= ...)");
    while (!at_end()) {
      const size_t name_pos = pos_;
      const std::string name = parse_name();
      skip_space();
      if (s_.substr(pos_, 3) != "::=") error_at(pos_, "'::=' after the rule name '" + name + "'");
      pos_ += 3;
      const uint32_t id = rule_id(name, name_pos);
      if (builder_.defined(id)) error_at(name_pos, "one definition of rule '" + name + "'", "a second one");
      builder_.define(id, parse_alternatives(name, false));
      skip_space();
    }
    for (const auto& [name, use] : uses_)
      if (!builder_.defined(use.first)) error_at(use.second, "a definition of rule '" + name + "'", "none");
    auto root = names_.find("root");
    if (root == names_.end()) fail("grammar: no 'root' rule (the start rule must be named root)");
    return builder_.build(root->second);
  }

 private:
  bool at_end() const { return pos_ >= s_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }

  [[noreturn]] void error_at(size_t at, const std::string& expected, std::string found = {}) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    if (found.empty()) {
      if (at >= s_.size()) {
        found = "the end of the grammar";
      } else {
        const size_t n = utf8::char_len(s_, at);
        found.push_back('\'');
        found.append(s_.substr(at, n ? n : 1));
        found.push_back('\'');
      }
    }
    fail("grammar line ", line, " column ", col, ": expected ", expected, ", found ", found);
  }

  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) error_at(pos_, "a rule name");
    return std::string(s_.substr(start, pos_ - start));
  }

  uint32_t rule_id(const std::string& name, size_t at) {
    auto [it, inserted] = names_.try_emplace(name, 0);
    if (inserted) {
      it->second = builder_.add_rule(name);
      uses_.emplace(name, std::make_pair(it->second, at));
    }
    return it->second;
  }

  // True when the text at pos_ is `name ::=`: the start of the next rule.
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < s_.size() && is_name_char(s_[p])) ++p;
    if (p == pos_) return false;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n' || s_[p] == '\r')) ++p;
    return s_.substr(p, 3) == "::=";
  }

  ExprPtr parse_alternatives(const std::string& rule, bool nested) {
    std::vector<ExprPtr> alts{parse_sequence(rule, nested)};
    while (peek() == '|') {
      ++pos_;
      alts.push_back(parse_sequence(rule, nested));
    }
    return alt(std::move(alts));
  }

  ExprPtr parse_sequence(const std::string& rule, bool nested) {
    std::vector<ExprPtr> items;
    for (;;) {
      skip_space();
      if (at_end() || peek() == '|' || peek() == ')') break;
      if (!nested && at_rule_start()) break;
      ExprPtr item = parse_primary(rule);
      items.push_back(parse_postfix(std::move(item)));
    }
    if (nested && at_end()) error_at(pos_, "')'");
    return seq(std::move(items));
  }

  ExprPtr parse_primary(const std::string& rule) {
    const char c = peek();
    if (c == '"') return parse_literal();
    if (c == '[') return codepoints(parse_class());
    if (c == '.') {
      ++pos_;
      return codepoints(CodepointSet::all_scalar_values());
    }
    if (c == '(') {
      ++pos_;
      ExprPtr inner = parse_alternatives(rule, true);
      if (peek() != ')') error_at(pos_, "')' closing the group");
      ++pos_;
      return inner;
    }
    if (is_name_char(c)) {
      const size_t at = pos_;
      return ref(rule_id(parse_name(), at));
    }
    error_at(pos_, "a literal, a character class, '(', '.' or a rule name");
  }

  ExprPtr parse_postfix(ExprPtr item) {
    for (;;) {
      const char c = peek();
      if (c == '*') {
        item = repeat(std::move(item), 0, Expr::kUnbounded);
      } else if (c == '+') {
        item = repeat(std::move(item), 1, Expr::kUnbounded);
      } else if (c == '?') {
        item = optional(std::move(item));
      } else if (c == '{') {
        ++pos_;
        skip_space();
        const uint32_t lo = parse_count();
        uint32_t hi = lo;
        skip_space();
        if (peek() == ',') {
          ++pos_;
          skip_space();
          hi = peek() == '}' ? Expr::kUnbounded : parse_count();
          skip_space();
        }
        if (peek() != '}') error_at(pos_, "'}' closing the repetition count");
        if (hi < lo) error_at(pos_, "a maximum count not below the minimum");
        item = repeat(std::move(item), lo, hi);
      } else {
        return item;
      }
      ++pos_;
    }
  }

  uint32_t parse_count() {
    const size_t start = pos_;
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > 1000000) error_at(start, "a repetition count of at most 1000000");
      ++pos_;
    }
    if (pos_ == start) error_at(pos_, "a repetition count");
    return static_cast<uint32_t>(v);
  }

  // One character of a literal or class at pos_, escapes decoded.
  char32_t parse_char() {
    if (at_end()) error_at(pos_, "a character");
    if (peek() != '\\') {
      const size_t n = utf8::char_len(s_, pos_);
      if (n == 0) error_at(pos_, "valid UTF-8");
      size_t i = pos_;
      const char32_t cp = utf8::next(s_, i);
      pos_ = i;
      return cp;
    }
    const size_t at = pos_;
    ++pos_;
    const char e = peek();
    ++pos_;
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': case '"': case '[': case ']': case '-': case '/': case '^': return static_cast<char32_t>(e);
      case 'x': return parse_hex(2, at);
      case 'u': return parse_hex(4, at);
      case 'U': return parse_hex(8, at);
      default: error_at(at, "an escape (\\n \\r \\t \\\\ \\\" \\[ \\] \\- \\xHH \\uHHHH \\UHHHHHHHH)");
    }
  }

  char32_t parse_hex(int digits, size_t at) {
    char32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) error_at(pos_, std::to_string(digits) + " hex digits");
      v = v * 16 + static_cast<char32_t>(d);
      ++pos_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) error_at(at, "a Unicode scalar value");
    return v;
  }

  ExprPtr parse_literal() {
    ++pos_;  // "
    std::string bytes;
    while (peek() != '"') {
      if (at_end() || peek() == '\n') error_at(pos_, "'\"' closing the literal");
      utf8::append(bytes, parse_char());
    }
    ++pos_;
    return literal(bytes);
  }

  CodepointSet parse_class() {
    const size_t open = pos_;
    ++pos_;  // [
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    CodepointSet set;
    while (peek() != ']') {
      if (at_end()) error_at(open, "']' closing the character class");
      const char32_t lo = parse_char();
      char32_t hi = lo;
      if (peek() == '-' && peek(1) != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) error_at(pos_, "a range whose end is not below its start");
      }
      set.add(lo, hi);
    }
    ++pos_;
    return negated ? set.complement() : set;
  }

  std::string_view s_;
  size_t pos_ = 0;
  GrammarBuilder builder_;
  std::map<std::string, uint32_t> names_;
  std::map<std::string, std::pair<uint32_t, size_t>> uses_;  // name -> (rule, first mention)
};

}  // namespace

Grammar parse_gbnf(std::string_view text) { return GbnfParser(text).parse(); }

}  // namespace lockstep::constraints
