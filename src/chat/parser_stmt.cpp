// Statement grammar: text, {{ expr }}, and the block tags chat templates use. Unsupported tags
// (include, extends, import, block, with, ...) are syntax errors that name the tag, not silent
// no-ops, so a template we cannot render faithfully is refused at load time.
#include "chat/builtins.h"
#include "chat/parser.h"
#include "core/error.h"

namespace lockstep::chat {

namespace {
StmtPtr make(Stmt::Kind k, const Token& at) { return std::make_unique<Stmt>(k, at.line, at.column); }
}  // namespace

// Token helpers shared by the statement and expression grammars.
bool Parser::skip_op(const char* op) {
  if (!is_op(op)) return false;
  next();
  return true;
}

bool Parser::skip_name(const char* n) {
  if (!is_name(n)) return false;
  next();
  return true;
}

void Parser::expect_op(const char* op) {
  if (!skip_op(op)) unexpected(std::string("'") + op + "'");
}

std::string Parser::expect_name() {
  if (cur().type != TokenType::Name) unexpected("a name");
  return next().text;
}

void Parser::error(const Token& at, const std::string& msg) const {
  throw Error(location(at.line, at.column) + "syntax error: " + msg);
}

void Parser::unexpected(const std::string& wanted) const {
  const Token& t = cur();
  std::string got;
  switch (t.type) {
    case TokenType::End: got = "end of template"; break;
    case TokenType::VarEnd: got = "'}}'"; break;
    case TokenType::BlockEnd: got = "'%}'"; break;
    case TokenType::Data: got = "template text"; break;
    case TokenType::String: got = "a string"; break;
    default: got = "'" + t.text + "'";
  }
  error(t, "expected " + wanted + ", found " + got);
}

Body Parser::parse_template() {
  Body body = parse_body({});
  if (cur().type != TokenType::End) unexpected("end of template");
  return body;
}

// Parses until `{% <one of end_tags>` and leaves the cursor on that tag's name.
Body Parser::parse_body(const std::vector<std::string>& end_tags) {
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.type == TokenType::End) {
      if (end_tags.empty()) return body;
      std::string want;
      for (const auto& e : end_tags) want += (want.empty() ? "'" : " or '") + e + "'";
      error(t, "unexpected end of template; expected " + want);
    }
    if (t.type == TokenType::Data) {
      StmtPtr s = make(Stmt::Kind::Data, t);
      s->text = next().text;
      body.push_back(std::move(s));
    } else if (t.type == TokenType::VarBegin) {
      StmtPtr s = make(Stmt::Kind::Output, next());
      s->expr = parse_tuple(true);
      if (cur().type != TokenType::VarEnd) unexpected("'}}'");
      next();
      body.push_back(std::move(s));
    } else if (t.type == TokenType::BlockBegin) {
      const Token& name = look();
      for (const auto& e : end_tags) {
        if (name.type == TokenType::Name && name.text == e) {
          next();
          return body;
        }
      }
      next();
      body.push_back(parse_statement());
    } else {
      unexpected("template text or a tag");
    }
  }
}

void Parser::end_tag(const std::string& name) {
  if (!(cur().type == TokenType::Name && cur().text == name)) unexpected("'" + name + "'");
  next();
  if (cur().type != TokenType::BlockEnd) unexpected("'%}'");
  next();
}

StmtPtr Parser::parse_statement() {
  const Token at = cur();
  if (at.type != TokenType::Name) unexpected("a tag name");
  const std::string& tag = at.text;
  if (tag == "if") return next(), parse_if(at);
  if (tag == "for") return next(), parse_for(at);
  if (tag == "set") return next(), parse_set(at);
  if (tag == "macro") return next(), parse_macro(at, false);
  if (tag == "call") return next(), parse_macro(at, true);
  if (tag == "filter") return next(), parse_filter_block(at);
  if (tag == "break" || tag == "continue") {
    next();
    if (cur().type != TokenType::BlockEnd) unexpected("'%}'");
    next();
    return make(tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, at);
  }
  if (tag == "generation") {  // transformers' AssistantTracker extension: renders its body
    next();
    if (cur().type != TokenType::BlockEnd) unexpected("'%}'");
    next();
    StmtPtr s = make(Stmt::Kind::Scope, at);
    s->body = parse_body({"endgeneration"});
    end_tag("endgeneration");
    return s;
  }
  error(at, "unsupported tag '" + tag + "'");
}

StmtPtr Parser::parse_if(const Token& at) {
  StmtPtr s = make(Stmt::Kind::If, at);
  while (true) {
    s->conditions.push_back(parse_tuple(false));
    if (cur().type != TokenType::BlockEnd) unexpected("'%}'");
    next();
    s->bodies.push_back(parse_body({"elif", "else", "endif"}));
    const std::string tag = next().text;
    if (tag == "elif") continue;
    if (tag == "else") {
      if (cur().type != TokenType::BlockEnd) unexpected("'%}'");
      next();
      s->else_body = parse_body({"endif"});
      next();
    }
    break;
  }
  if (cur().type != TokenType::BlockEnd) unexpected("'%}'");
  next();
  return s;
}

std::vector<std::string> Parser::parse_target_names() {
  // A name or a tuple of names (`a, b` or `(a, b)`), as Jinja2's parse_assign_target allows.
  std::vector<std::string> names;
  const bool parens = skip_op("(");
  do {
    if (parens && is_op(")")) break;
    names.push_back(expect_name());
  } while (skip_op(","));
  if (parens) expect_op(")");
  return names;
}

StmtPtr Parser::parse_for(const Token& at) {
  StmtPtr s = make(Stmt::Kind::For, at);
  s->targets = parse_target_names();
  if (!skip_name("in")) unexpected("'in'");
  s->expr = parse_tuple(false, {"recursive"});
  if (skip_name("if")) s->cond = parse_expression();
  if (is_name("recursive")) error(cur(), "recursive for loops are not supported");
  if (cur().type != TokenType::BlockEnd) unexpected("'%}'");
  next();
  s->body = parse_body({"endfor", "else"});
  if (next().text == "else") {
    if (cur().type != TokenType::BlockEnd) unexpected("'%}'");
    next();
    s->else_body = parse_body({"endfor"});
    next();
  }
  if (cur().type != TokenType::BlockEnd) unexpected("'%}'");
  next();
  return s;
}

StmtPtr Parser::parse_set(const Token& at) {
  StmtPtr s = make(Stmt::Kind::Set, at);
  if (cur().type == TokenType::Name && look().type == TokenType::Operator && look().text == "." &&
      look(2).type == TokenType::Name) {
    s->targets.push_back(next().text);  // {% set ns.attr = value %}
    next();
    s->text = next().text;
  } else {
    s->targets = parse_target_names();
  }
  if (skip_op("=")) {
    s->expr = parse_tuple(true);
    if (cur().type != TokenType::BlockEnd) unexpected("'%}'");
    next();
    return s;
  }
  if (!s->text.empty() || s->targets.size() != 1) unexpected("'='");
  // Block assignment: {% set name | filters %}body{% endset %}.
  s->kind = Stmt::Kind::SetBlock;
  if (is_op("|")) {
    ExprPtr subject = std::make_unique<Expr>(Expr::Kind::Name, cur().line, cur().column);
    s->expr = parse_filter(std::move(subject), false);
  }
  if (cur().type != TokenType::BlockEnd) unexpected("'%}'");
  next();
  s->body = parse_body({"endset"});
  end_tag("endset");
  return s;
}

void Parser::parse_params(Stmt* s) {
  expect_op("(");
  while (!is_op(")")) {
    if (!s->targets.empty()) expect_op(",");
    if (is_op(")")) break;
    s->targets.push_back(expect_name());
    s->defaults.push_back(skip_op("=") ? parse_expression() : nullptr);
  }
  next();
}

StmtPtr Parser::parse_macro(const Token& at, bool call_block) {
  StmtPtr s = make(call_block ? Stmt::Kind::CallBlock : Stmt::Kind::Macro, at);
  if (call_block) {
    if (is_op("(")) parse_params(s.get());
    s->expr = parse_expression();
    if (s->expr->kind != Expr::Kind::Call) error(at, "expected a call expression after 'call'");
  } else {
    s->text = expect_name();
    parse_params(s.get());
  }
  if (cur().type != TokenType::BlockEnd) unexpected("'%}'");
  next();
  const std::string end = call_block ? "endcall" : "endmacro";
  s->body = parse_body({end});
  end_tag(end);
  return s;
}

StmtPtr Parser::parse_filter_block(const Token& at) {
  StmtPtr s = make(Stmt::Kind::FilterBlock, at);
  // The filters apply to the rendered body, which the evaluator binds to the empty name.
  ExprPtr subject = std::make_unique<Expr>(Expr::Kind::Name, at.line, at.column);
  s->expr = parse_filter(std::move(subject), true);
  if (cur().type != TokenType::BlockEnd) unexpected("'%}'");
  next();
  s->body = parse_body({"endfilter"});
  end_tag("endfilter");
  return s;
}

}  // namespace lockstep::chat
