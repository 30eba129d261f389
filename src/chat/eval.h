// Evaluator: runs a parsed template against variables and appends the text it renders.
// Scoping follows Jinja2: a for-loop iteration and a macro call get fresh scopes (so `set` inside
// them does not leak out, which is why templates use namespace()), `if` does not.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "chat/ast.h"
#include "chat/value.h"
#include "core/error.h"

namespace lockstep::chat {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      const auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

// An error that already carries its template location (the innermost node that failed).
class LocatedError : public Error {
 public:
  using Error::Error;
};

class Evaluator {
 public:
  enum class Flow { Normal, Break, Continue };

  // Renders `body` with `scope` as the template's top-level scope.
  std::string render(const Body& body, const ScopePtr& scope);

  Value eval(const Expr& e, const ScopePtr& scope);

 private:
  Flow exec(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out);
  void exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
  void exec_set(const Stmt& s, const ScopePtr& scope);
  Value make_macro(const Stmt& s, const ScopePtr& scope, bool is_caller);
  std::string capture(const Body& body, const ScopePtr& scope);

  Value eval_inner(const Expr& e, const ScopePtr& scope);
  Value eval_binary(const Expr& e, const ScopePtr& scope);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  Args eval_args(const Expr& e, const ScopePtr& scope);

  int depth_ = 0;  // macro call depth, bounded so a runaway recursive macro is an error
};

// Python binary arithmetic (+ - * / // % **) with its type rules; throws lockstep::Error.
Value arithmetic(const std::string& op, const Value& x, const Value& y);

}  // namespace lockstep::chat
