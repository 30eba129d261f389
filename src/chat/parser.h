// Parser: tokens -> statement tree. It follows Jinja2's grammar and operator precedence (including
// its quirks: `**` is left-associative, filters and `is` tests bind tighter than unary minus's
// operand but looser than attribute access, `not x is y` means `not (x is y)`).
#pragma once

#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"

namespace lockstep::chat {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}
  // Throws lockstep::Error with line/column on any syntax error, unknown filter or unknown test.
  Body parse_template();

 private:
  // Statements (parser_stmt.cpp).
  Body parse_body(const std::vector<std::string>& end_tags);
  StmtPtr parse_statement();
  StmtPtr parse_if(const Token& at);
  StmtPtr parse_for(const Token& at);
  StmtPtr parse_set(const Token& at);
  StmtPtr parse_macro(const Token& at, bool call_block);
  StmtPtr parse_filter_block(const Token& at);
  void parse_params(Stmt* s);
  std::vector<std::string> parse_target_names();
  void end_tag(const std::string& name);  // consumes `name %}` after a `{%`

  // Expressions (parser_expr.cpp).
 public:
  ExprPtr parse_tuple(bool with_condexpr, const std::vector<std::string>& extra_end = {},
                      bool explicit_parens = false);
  ExprPtr parse_expression(bool with_condexpr = true);

 private:
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);
  void parse_call_args(Expr* call);
  std::string parse_dotted_name();

  // Token helpers.
  const Token& cur() const { return t_[i_]; }
  const Token& look(size_t n = 1) const { return t_[i_ + n < t_.size() ? i_ + n : t_.size() - 1]; }
  Token next() { return i_ + 1 < t_.size() ? t_[i_++] : t_[i_]; }
  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == TokenType::Name && cur().text == n; }
  bool skip_op(const char* op);
  bool skip_name(const char* n);
  void expect_op(const char* op);
  std::string expect_name();
  [[noreturn]] void error(const Token& at, const std::string& msg) const;
  [[noreturn]] void unexpected(const std::string& wanted) const;

  std::vector<Token> t_;
  size_t i_ = 0;
};

}  // namespace lockstep::chat
