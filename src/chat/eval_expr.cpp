// Expression evaluation with Python's semantics for the operators (int/float promotion, true
// division, floored // and %, str/list concatenation and repetition) and Jinja2's for names and
// Undefined (printing it is fine, computing with it is an error).
#include <cmath>

#include "chat/builtins.h"
#include "chat/eval.h"
#include "chat/lexer.h"

namespace lockstep::chat {

namespace {

constexpr size_t kMaxString = size_t(256) << 20;  // repetition cap: a template cannot ask for GiBs

[[noreturn]] void type_error(const std::string& op, const Value& x, const Value& y) {
  if (x.is_undefined()) fail(x.undefined_hint());
  if (y.is_undefined()) fail(y.undefined_hint());
  fail("unsupported operand type(s) for ", op, ": '", x.type_name(), "' and '", y.type_name(), "'");
}

Value repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    if (!seq.str().empty() && uint64_t(n) > kMaxString / seq.str().size()) fail("string repetition too large");
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value(out);
  }
  std::vector<Value> out;
  if (!seq.list().items.empty() && uint64_t(n) > kMaxString / seq.list().items.size()) fail("list repetition too large");
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list().items.begin(), seq.list().items.end());
  return Value::list(std::move(out), seq.list().is_tuple);
}

// Python ints are unbounded; ours are 64-bit, and overflow is an error rather than a wrap.
int64_t checked(char op, int64_t a, int64_t b) {
  int64_t r = 0;
  const bool overflow = op == '+' ? __builtin_add_overflow(a, b, &r)
                        : op == '-' ? __builtin_sub_overflow(a, b, &r)
                                    : __builtin_mul_overflow(a, b, &r);
  if (overflow) fail("integer overflow");
  return r;
}

}  // namespace

Value arithmetic(const std::string& op, const Value& x, const Value& y) {
  if (op == "~") return Value(x.to_str() + y.to_str());
  const bool nums = x.is_number() && y.is_number();
  const bool ints = nums && !x.is_float() && !y.is_float();
  if (op == "+") {
    if (ints) return Value(checked('+', x.integer(), y.integer()));
    if (nums) return Value(x.number() + y.number());
    if (x.is_string() && y.is_string()) return Value(x.str() + y.str());
    if (x.is_list() && y.is_list() && x.list().is_tuple == y.list().is_tuple) {
      std::vector<Value> out = x.list().items;
      out.insert(out.end(), y.list().items.begin(), y.list().items.end());
      return Value::list(std::move(out), x.list().is_tuple);
    }
  } else if (op == "-") {
    if (ints) return Value(checked('-', x.integer(), y.integer()));
    if (nums) return Value(x.number() - y.number());
  } else if (op == "*") {
    if (ints) return Value(checked('*', x.integer(), y.integer()));
    if (nums) return Value(x.number() * y.number());
    if ((x.is_string() || x.is_list()) && (y.is_int() || y.is_bool())) return repeat(x, y.integer());
    if ((y.is_string() || y.is_list()) && (x.is_int() || x.is_bool())) return repeat(y, x.integer());
  } else if (op == "/") {
    if (nums) {
      if (y.number() == 0) fail("division by zero");
      return Value(x.number() / y.number());
    }
  } else if (op == "//" || op == "%") {
    if (ints) {
      const int64_t a = x.integer(), b = y.integer();
      if (b == 0) fail("integer division or modulo by zero");
      int64_t q = a / b, m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) --q, m += b;  // Python floors
      return Value(op == "//" ? q : m);
    }
    if (nums) {
      const double a = x.number(), b = y.number();
      if (b == 0) fail("float division or modulo by zero");
      // CPython's float_divmod.
      double m = std::fmod(a, b);
      double div = (a - m) / b;
      if (m != 0 && ((m < 0) != (b < 0))) m += b, div -= 1.0;
      double q = std::copysign(0.0, a / b);
      if (div != 0) {
        q = std::floor(div);
        if (div - q > 0.5) q += 1.0;
      }
      return Value(op == "//" ? q : m);
    }
    if (op == "%" && x.is_string()) fail("printf-style string formatting ('%') is not supported");
  } else if (op == "**") {
    if (ints && y.integer() >= 0) {
      int64_t base = x.integer(), e = y.integer(), acc = 1;
      for (; e > 0; e >>= 1) {
        int64_t t = 0;
        if (e & 1) {
          if (__builtin_mul_overflow(acc, base, &t)) fail("integer overflow");
          acc = t;
        }
        if (e > 1) {
          if (__builtin_mul_overflow(base, base, &t)) fail("integer overflow");
          base = t;
        }
      }
      return Value(acc);
    }
    if (nums) {
      if (x.number() == 0 && y.number() < 0) fail("0.0 cannot be raised to a negative power");
      const double r = std::pow(x.number(), y.number());
      if (std::isinf(r) && std::isfinite(x.number()) && std::isfinite(y.number())) fail("numerical result out of range");
      return Value(r);
    }
  }
  type_error(op, x, y);
}

Value Evaluator::eval(const Expr& e, const ScopePtr& scope) {
  try {
    return eval_inner(e, scope);
  } catch (const LocatedError&) {
    throw;
  } catch (const std::exception& err) {
    throw LocatedError(location(e.line, e.column) + err.what());
  }
}

Args Evaluator::eval_args(const Expr& e, const ScopePtr& scope) {
  Args a;
  for (const auto& item : e.items) a.positional.push_back(eval(*item, scope));
  for (const auto& [k, v] : e.keywords) a.keywords.emplace_back(k, eval(*v, scope));
  return a;
}

Value Evaluator::eval_inner(const Expr& e, const ScopePtr& scope) {
  using K = Expr::Kind;
  switch (e.kind) {
    case K::Literal: return e.value;
    case K::Name: {
      if (const Value* v = scope->find(e.name)) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case K::List:
    case K::Tuple: {
      std::vector<Value> items;
      for (const auto& i : e.items) items.push_back(eval(*i, scope));
      return Value::list(std::move(items), e.kind == K::Tuple);
    }
    case K::Dict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) d->set(eval(*e.items[i], scope), eval(*e.items[i + 1], scope));
      return Value(std::move(d));
    }
    case K::Attr: return get_attr(eval(*e.a, scope), e.name);
    case K::Item: {
      const Value obj = eval(*e.a, scope);
      return get_item(obj, eval(*e.b, scope));
    }
    case K::Slice: {
      const Value obj = eval(*e.a, scope);
      Value parts[3];
      for (size_t i = 0; i < 3; ++i) parts[i] = e.items[i] ? eval(*e.items[i], scope) : Value::none();
      return get_slice(obj, &parts[0], &parts[1], &parts[2]);
    }
    case K::Call: {
      const Value callee = eval(*e.a, scope);
      Args args = eval_args(e, scope);
      if (callee.is_undefined()) fail(callee.undefined_hint());
      if (!callee.is_callable()) fail("'", callee.type_name(), "' object is not callable");
      return callee.callable().call(args);
    }
    case K::Filter: {
      const Value subject = eval(*e.a, scope);
      return apply_filter(e.name, subject, eval_args(e, scope));
    }
    case K::Test: {
      const Value subject = eval(*e.a, scope);
      return Value(apply_test(e.name, subject, eval_args(e, scope)) != e.negated);
    }
    case K::Neg:
    case K::Pos: {
      const Value v = eval(*e.a, scope);
      if (v.is_undefined()) fail(v.undefined_hint());
      if (!v.is_number()) fail("bad operand type for unary ", e.kind == K::Neg ? "-" : "+", ": '", v.type_name(), "'");
      if (e.kind == K::Pos) return v.is_bool() ? Value(v.integer()) : v;
      return v.is_float() ? Value(-v.number()) : Value(checked('-', 0, v.integer()));
    }
    case K::Not: return Value(!eval(*e.a, scope).truthy());
    case K::And: {  // Python returns the deciding operand, not a bool
      Value left = eval(*e.a, scope);
      return left.truthy() ? eval(*e.b, scope) : left;
    }
    case K::Or: {
      Value left = eval(*e.a, scope);
      return left.truthy() ? left : eval(*e.b, scope);
    }
    case K::Binary: {
      const Value x = eval(*e.a, scope);
      const Value y = eval(*e.b, scope);
      return arithmetic(e.name, x, y);
    }
    case K::Compare: return eval_compare(e, scope);
    case K::Cond:
      if (eval(*e.b, scope).truthy()) return eval(*e.a, scope);
      return e.c ? eval(*e.c, scope) : Value::undefined("the conditional expression had no else branch");
  }
  fail("unknown expression");
}

Value Evaluator::eval_compare(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.a, scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.items[i], scope);
    const std::string& op = e.ops[i];
    bool ok;
    if (op == "==") ok = equals(left, right);
    else if (op == "!=") ok = !equals(left, right);
    else if (op == "in") ok = value_in(left, right);
    else if (op == "not in") ok = !value_in(left, right);
    else if (op == "<") ok = less(left, right);
    else if (op == ">") ok = less(right, left);
    else if (op == "<=") ok = less(left, right) || equals(left, right);
    else ok = less(right, left) || equals(left, right);
    if (!ok) return Value(false);  // chained: a < b < c stops at the first false link
    left = std::move(right);
  }
  return Value(true);
}

}  // namespace lockstep::chat
