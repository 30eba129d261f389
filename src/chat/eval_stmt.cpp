// Statement execution: output, if, for (with `loop`, filtering, else, break/continue), set
// (names, tuples, namespace attributes, blocks), macros and call blocks, filter blocks.
#include "chat/builtins.h"
#include "chat/eval.h"
#include "chat/lexer.h"

namespace lockstep::chat {

namespace {

constexpr int kMaxDepth = 200;  // nested macro calls

ScopePtr child(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

// (Not named `bind`: argument-dependent lookup would pick std::bind for a std::vector argument.)
void bind_targets(Scope& scope, const std::vector<std::string>& names, const Value& v) {
  if (names.size() == 1) {
    scope.vars[names[0]] = v;
    return;
  }
  if (v.is_undefined()) fail(v.undefined_hint());
  const std::vector<Value> items = iterate(v);
  if (items.size() != names.size())
    fail(items.size() < names.size() ? "not enough" : "too many", " values to unpack (expected ",
         names.size(), ", got ", items.size(), ")");
  for (size_t i = 0; i < names.size(); ++i) scope.vars[names[i]] = items[i];
}

// The `loop` object of one iteration.
Value loop_object(const std::vector<Value>& items, size_t i) {
  auto d = std::make_shared<Dict>();
  d->is_object = true;
  const int64_t n = int64_t(items.size()), k = int64_t(i);
  d->set(Value("index0"), Value(k));
  d->set(Value("index"), Value(k + 1));
  d->set(Value("revindex0"), Value(n - k - 1));
  d->set(Value("revindex"), Value(n - k));
  d->set(Value("first"), Value(k == 0));
  d->set(Value("last"), Value(k == n - 1));
  d->set(Value("length"), Value(n));
  d->set(Value("depth"), Value(1));
  d->set(Value("depth0"), Value(0));
  d->set(Value("previtem"), k > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
  d->set(Value("nextitem"), k + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
  d->set(Value("cycle"), Value::function("loop.cycle", [k](const Args& a) {
           if (a.positional.empty()) fail("no items for cycling given");
           return a.positional[size_t(k) % a.positional.size()];
         }));
  return Value(std::move(d));
}

}  // namespace

std::string Evaluator::render(const Body& body, const ScopePtr& scope) {
  std::string out;
  exec(body, scope, out);
  return out;
}

std::string Evaluator::capture(const Body& body, const ScopePtr& scope) {
  std::string out;
  exec(body, scope, out);
  return out;
}

Evaluator::Flow Evaluator::exec(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec(*s, scope, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
  using K = Stmt::Kind;
  try {
    switch (s.kind) {
      case K::Data: out += s.text; break;
      case K::Output: out += eval(*s.expr, scope).to_str(); break;
      case K::If:
        for (size_t i = 0; i < s.conditions.size(); ++i) {
          if (eval(*s.conditions[i], scope).truthy()) return exec(s.bodies[i], scope, out);
        }
        return exec(s.else_body, scope, out);
      case K::For: exec_for(s, scope, out); break;
      case K::Set: exec_set(s, scope); break;
      case K::SetBlock: {
        Value v(capture(s.body, child(scope)));
        if (s.expr) {
          ScopePtr inner = child(scope);
          inner->vars[""] = v;
          v = eval(*s.expr, inner);
        }
        scope->vars[s.targets[0]] = v;
        break;
      }
      case K::Macro: scope->vars[s.text] = make_macro(s, scope, false); break;
      case K::CallBlock: {
        const Expr& call = *s.expr;
        const Value callee = eval(*call.a, scope);
        if (callee.is_undefined()) fail(callee.undefined_hint());
        if (!callee.is_callable()) fail("'", callee.type_name(), "' object is not callable");
        Args args = eval_args(call, scope);
        args.keywords.emplace_back("caller", make_macro(s, scope, true));
        out += callee.callable().call(args).to_str();
        break;
      }
      case K::FilterBlock: {
        ScopePtr inner = child(scope);
        inner->vars[""] = Value(capture(s.body, child(scope)));
        out += eval(*s.expr, inner).to_str();
        break;
      }
      case K::Break: return Flow::Break;
      case K::Continue: return Flow::Continue;
      case K::Scope: return exec(s.body, child(scope), out);  // a call block in transformers
    }
  } catch (const LocatedError&) {
    throw;
  } catch (const std::exception& err) {
    throw LocatedError(location(s.line, s.column) + err.what());
  }
  return Flow::Normal;
}

void Evaluator::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
  const Value seq = eval(*s.expr, scope);
  if (seq.is_none() || seq.is_number() || seq.is_callable()) fail("'", seq.type_name(), "' object is not iterable");
  std::vector<Value> items = iterate(seq);
  if (s.cond) {  // `for x in xs if cond`: filtered before the loop, so loop.length counts kept items
    std::vector<Value> kept;
    for (const Value& item : items) {
      ScopePtr probe = child(scope);
      bind_targets(*probe, s.targets, item);
      if (eval(*s.cond, probe).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  // Jinja2 runs the else block unless some iteration finished its body: an iteration cut short
  // by continue or break does not count (its compiled loop clears the flag at the body's end).
  bool completed = false;
  for (size_t i = 0; i < items.size(); ++i) {
    ScopePtr iteration = child(scope);
    bind_targets(*iteration, s.targets, items[i]);
    iteration->vars["loop"] = loop_object(items, i);
    const Flow f = exec(s.body, iteration, out);
    if (f == Flow::Normal) completed = true;
    if (f == Flow::Break) break;
  }
  if (!completed) exec(s.else_body, child(scope), out);
}

void Evaluator::exec_set(const Stmt& s, const ScopePtr& scope) {
  Value v = eval(*s.expr, scope);
  if (s.text.empty()) {
    bind_targets(*scope, s.targets, v);
    return;
  }
  const Value* target = scope->find(s.targets[0]);
  if (!target || !target->is_dict() || !target->dict().is_namespace)
    fail("cannot assign attribute on non-namespace object '", s.targets[0], "'");
  target->dict().set(Value(s.text), std::move(v));
}

// A macro (or the `caller` of a call block) as a callable value. Parameters bind positionally,
// then by keyword; missing ones take their default (evaluated at call time) or are undefined.
Value Evaluator::make_macro(const Stmt& s, const ScopePtr& scope, bool is_caller) {
  const Stmt* stmt = &s;
  const std::string name = is_caller ? "caller" : s.text;
  // Weak: the macro usually lives in the scope it was defined in, and a strong pointer back to
  // that scope would be a reference cycle that leaks every render.
  std::weak_ptr<Scope> defined_in = scope;
  return Value::function(name, [this, stmt, defined_in, name](const Args& a) {
    const ScopePtr scope = defined_in.lock();
    if (!scope) fail("macro '", name, "' called after the scope that defined it ended");
    if (a.positional.size() > stmt->targets.size())
      fail("macro '", name, "' takes not more than ", stmt->targets.size(), " argument(s)");
    if (depth_ >= kMaxDepth) fail("macro calls nested deeper than ", kMaxDepth);
    ScopePtr frame = child(scope);
    for (size_t i = 0; i < stmt->targets.size(); ++i) {
      const std::string& p = stmt->targets[i];
      const Value* given = i < a.positional.size() ? &a.positional[i] : nullptr;
      for (const auto& kv : a.keywords)
        if (kv.first == p) given = &kv.second;
      if (given) frame->vars[p] = *given;
      else if (stmt->defaults[i]) frame->vars[p] = eval(*stmt->defaults[i], frame);
      else frame->vars[p] = Value::undefined("parameter '" + p + "' was not provided");
    }
    for (const auto& kv : a.keywords) {
      bool known = kv.first == "caller";
      for (const auto& p : stmt->targets) known = known || p == kv.first;
      if (!known) fail("macro '", name, "' takes no keyword argument '", kv.first, "'");
      if (kv.first == "caller") frame->vars["caller"] = kv.second;
    }
    ++depth_;
    std::string out;
    try {
      exec(stmt->body, frame, out);
    } catch (...) {
      --depth_;
      throw;
    }
    --depth_;
    return Value(out);
  });
}

}  // namespace lockstep::chat
