// Lexer: template source -> tokens. It applies all of Jinja2's whitespace control here, so the
// parser never sees it: `{%-`/`-%}` strip, and Hugging Face's trim_blocks (drop the newline after a
// block or comment tag) and lstrip_blocks (drop spaces/tabs before a block or comment tag that
// starts a line). Like Jinja2 it first normalises \r\n and \r to \n and drops one trailing newline
// (keep_trailing_newline=False).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::chat {

enum class TokenType {
  Data,        // literal template text
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,      // value already unescaped
  Integer,
  Float,
  Operator,    // + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
  End,
};

struct Token {
  TokenType type = TokenType::End;
  std::string text;  // data, name, operator, or unescaped string value
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int column = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws lockstep::Error naming line and column for unterminated tags, strings or comments.
std::vector<Token> lex(const std::string& source, const LexOptions& options = {});

// "chat template line L, column C: " — the prefix of every located error.
std::string location(int line, int column);

}  // namespace lockstep::chat
