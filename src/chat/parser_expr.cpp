// Expression grammar, precedence lowest first: conditional, or, and, not, comparisons (chained),
// + -, ~, * / // %, **, unary +/-, then primary with postfix (.attr [item] (call)) and
// filters/tests. This mirrors Jinja2's parser so that odd-looking templates group the same way.
#include "chat/builtins.h"
#include "chat/parser.h"
#include "core/error.h"

namespace lockstep::chat {

namespace {
ExprPtr make(Expr::Kind k, const Token& at) { return std::make_unique<Expr>(k, at.line, at.column); }
}  // namespace

ExprPtr Parser::parse_tuple(bool with_condexpr, const std::vector<std::string>& extra_end,
                            bool explicit_parens) {
  const Token at = cur();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  auto at_end = [&] {
    if (cur().type == TokenType::VarEnd || cur().type == TokenType::BlockEnd || is_op(")")) return true;
    for (const auto& n : extra_end)
      if (is_name(n.c_str())) return true;
    return false;
  };
  while (true) {
    if (!items.empty()) expect_op(",");
    if (at_end()) break;
    items.push_back(parse_expression(with_condexpr));
    if (is_op(",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) unexpected("an expression");
  }
  ExprPtr t = make(Expr::Kind::Tuple, at);
  t->items = std::move(items);
  return t;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  if (!with_condexpr) return parse_or();
  ExprPtr e = parse_or();
  while (is_name("if")) {
    const Token at = next();
    ExprPtr cond = parse_or();
    ExprPtr otherwise;
    if (skip_name("else")) otherwise = parse_expression(true);
    ExprPtr c = make(Expr::Kind::Cond, at);
    c->a = std::move(e);
    c->b = std::move(cond);
    c->c = std::move(otherwise);
    e = std::move(c);
  }
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    ExprPtr e = make(Expr::Kind::Or, next());
    e->a = std::move(left);
    e->b = parse_and();
    left = std::move(e);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    ExprPtr e = make(Expr::Kind::And, next());
    e->a = std::move(left);
    e->b = parse_not();
    left = std::move(e);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    ExprPtr e = make(Expr::Kind::Not, next());
    e->a = parse_not();
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Token at = cur();
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (cur().type == TokenType::Operator &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
         cur().text == ">" || cur().text == ">=")) {
      op = next().text;
    } else if (is_name("in")) {
      next();
      op = "in";
    } else if (is_name("not") && look().type == TokenType::Name && look().text == "in") {
      next();
      next();
      op = "not in";
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(Expr::Kind::Compare, at);
      cmp->a = std::move(first);
    }
    cmp->ops.push_back(op);
    cmp->items.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

namespace {
ExprPtr binary(const Token& at, const std::string& op, ExprPtr a, ExprPtr b) {
  ExprPtr e = make(Expr::Kind::Binary, at);
  e->name = op;
  e->a = std::move(a);
  e->b = std::move(b);
  return e;
}
}  // namespace

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token at = next();
    left = binary(at, at.text, std::move(left), parse_concat());
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr left = parse_math2();
  while (is_op("~")) {
    const Token at = next();
    left = binary(at, "~", std::move(left), parse_math2());
  }
  return left;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token at = next();
    left = binary(at, at.text, std::move(left), parse_pow());
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const Token at = next();
    left = binary(at, "**", std::move(left), parse_unary(true));
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    const Token at = next();
    node = make(at.text == "-" ? Expr::Kind::Neg : Expr::Kind::Pos, at);
    node->a = parse_unary(false);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token at = cur();
  ExprPtr node;
  switch (at.type) {
    case TokenType::Name: {
      next();
      node = make(Expr::Kind::Literal, at);
      if (at.text == "true" || at.text == "True") node->value = Value(true);
      else if (at.text == "false" || at.text == "False") node->value = Value(false);
      else if (at.text == "none" || at.text == "None") node->value = Value::none();
      else {
        node->kind = Expr::Kind::Name;
        node->name = at.text;
      }
      return node;
    }
    case TokenType::String: {
      std::string s = next().text;
      while (cur().type == TokenType::String) s += next().text;  // 'a' 'b' is 'ab', as in Python
      node = make(Expr::Kind::Literal, at);
      node->value = Value(std::move(s));
      return node;
    }
    case TokenType::Integer:
    case TokenType::Float:
      next();
      node = make(Expr::Kind::Literal, at);
      node->value = at.type == TokenType::Integer ? Value(at.int_value) : Value(at.float_value);
      return node;
    default: break;
  }
  if (skip_op("(")) {
    node = parse_tuple(true, {}, true);
    expect_op(")");
    return node;
  }
  if (is_op("[") || is_op("{")) {
    const bool dict = is_op("{");
    next();
    node = make(dict ? Expr::Kind::Dict : Expr::Kind::List, at);
    const char* close = dict ? "}" : "]";
    while (!is_op(close)) {
      if (!node->items.empty()) {
        expect_op(",");
        if (is_op(close)) break;  // trailing comma
      }
      node->items.push_back(parse_expression());
      if (dict) {
        expect_op(":");
        node->items.push_back(parse_expression());
      }
    }
    next();
    return node;
  }
  unexpected("an expression");
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      ExprPtr call = make(Expr::Kind::Call, cur());
      call->a = std::move(node);
      parse_call_args(call.get());
      node = std::move(call);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      node = parse_filter(std::move(node), false);
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      ExprPtr call = make(Expr::Kind::Call, cur());
      call->a = std::move(node);
      parse_call_args(call.get());
      node = std::move(call);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Token at = next();
  if (at.text == ".") {
    if (cur().type == TokenType::Name) {
      ExprPtr e = make(Expr::Kind::Attr, at);
      e->a = std::move(node);
      e->name = next().text;
      return e;
    }
    if (cur().type == TokenType::Integer) {  // `messages.0` is messages[0]
      ExprPtr e = make(Expr::Kind::Item, at);
      e->a = std::move(node);
      e->b = make(Expr::Kind::Literal, cur());
      e->b->value = Value(next().int_value);
      return e;
    }
    unexpected("an attribute name");
  }
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  next();
  ExprPtr index;
  if (args.size() == 1) {
    index = std::move(args[0]);
  } else {
    index = make(Expr::Kind::Tuple, at);
    index->items = std::move(args);
  }
  if (index->kind == Expr::Kind::Slice) {
    index->a = std::move(node);
    return index;
  }
  ExprPtr e = make(Expr::Kind::Item, at);
  e->a = std::move(node);
  e->b = std::move(index);
  return e;
}

ExprPtr Parser::parse_subscribed() {
  const Token at = cur();
  std::vector<ExprPtr> parts;
  if (skip_op(":")) {
    parts.emplace_back();
  } else {
    ExprPtr e = parse_expression();
    if (!skip_op(":")) return e;
    parts.push_back(std::move(e));
  }
  auto bound = [&] { return is_op("]") || is_op(",") || is_op(":") ? ExprPtr() : parse_expression(); };
  parts.push_back(bound());
  if (skip_op(":")) parts.push_back(bound());
  else parts.emplace_back();
  ExprPtr s = make(Expr::Kind::Slice, at);
  s->items = std::move(parts);
  return s;
}

void Parser::parse_call_args(Expr* call) {
  expect_op("(");
  while (!is_op(")")) {
    if (!call->items.empty() || !call->keywords.empty()) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (cur().type == TokenType::Name && look().type == TokenType::Operator && look().text == "=") {
      std::string key = next().text;
      next();
      call->keywords.emplace_back(std::move(key), parse_expression());
    } else {
      if (!call->keywords.empty()) error(cur(), "positional argument after keyword argument");
      call->items.push_back(parse_expression());
    }
  }
  next();
}

std::string Parser::parse_dotted_name() {
  std::string n = expect_name();
  while (is_op(".") && look().type == TokenType::Name) {
    next();
    n += "." + next().text;
  }
  return n;
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (start_inline || is_op("|")) {
    if (!start_inline) next();
    start_inline = false;
    const Token at = cur();
    ExprPtr f = make(Expr::Kind::Filter, at);
    f->name = parse_dotted_name();
    if (!has_filter(f->name)) error(at, "no filter named '" + f->name + "'");
    f->a = std::move(node);
    if (is_op("(")) parse_call_args(f.get());
    node = std::move(f);
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  const Token at = next();  // 'is'
  ExprPtr t = make(Expr::Kind::Test, at);
  t->negated = skip_name("not");
  const Token name_at = cur();
  t->name = parse_dotted_name();
  if (!has_test(t->name)) error(name_at, "no test named '" + t->name + "'");
  t->a = std::move(node);
  if (is_op("(")) {
    parse_call_args(t.get());
  } else if ((cur().type == TokenType::Name || cur().type == TokenType::String ||
              cur().type == TokenType::Integer || cur().type == TokenType::Float || is_op("[") ||
              is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    // `x is divisibleby 3`, `x is sameas false`: one argument without parentheses.
    if (is_name("is")) error(cur(), "you cannot chain multiple tests with 'is'");
    t->items.push_back(parse_postfix(parse_primary()));
  }
  return t;
}

}  // namespace lockstep::chat
