// The parsed template: expressions and statements, each with the line/column it came from so that
// run-time errors can point at the template text.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace lockstep::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    List,      // items
    Tuple,     // items
    Dict,      // items: key0, value0, key1, value1, ...
    Attr,      // a.name
    Item,      // a[b]
    Slice,     // a[items[0]:items[1]:items[2]] (null entries are omitted bounds)
    Call,      // a(items..., keywords...)
    Filter,    // a | name(items..., keywords...)
    Test,      // a is [not] name(items...)
    Neg,       // -a
    Pos,       // +a
    Not,       // not a
    And,       // a and b
    Or,        // a or b
    Binary,    // a op b: + - * / // % ** ~
    Compare,   // a ops[0] items[0] ops[1] items[1] ... (chained, like Python)
    Cond,      // a if b else c (c may be null)
  };
  Kind kind;
  int line = 0;
  int column = 0;
  Value value;
  std::string name;  // Name, Attr, Filter, Test; the operator of Binary
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  std::vector<std::string> ops;  // Compare
  ExprPtr a, b, c;
  bool negated = false;  // Test: `is not`

  Expr(Kind k, int l, int col) : kind(k), line(l), column(col) {}
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    Data,       // text
    Output,     // {{ expr }}
    If,         // conditions[i] -> bodies[i]; else_body
    For,        // for targets in expr [if cond]: body; else_body
    Set,        // set targets = expr, or set targets[0].attr = expr
    SetBlock,   // {% set name %}body{% endset %} (optional filter in expr: a Filter chain on Name "")
    Macro,      // macro name(params = defaults): body
    CallBlock,  // {% call(params) expr %}body{% endcall %}
    FilterBlock,// {% filter f %}body{% endfilter %}
    Break,
    Continue,
    Scope,      // a body run as-is ({% generation %} of transformers' AssistantTracker)
  };
  Kind kind;
  int line = 0;
  int column = 0;
  std::string text;                  // Data; Macro name; Set attribute name
  ExprPtr expr;                      // Output, For iterable, Set value, CallBlock call, filters
  ExprPtr cond;                      // For filter
  std::vector<std::string> targets;  // For/Set names; Macro/CallBlock parameter names
  std::vector<ExprPtr> defaults;     // Macro/CallBlock parameter defaults (null when none)
  std::vector<ExprPtr> conditions;   // If
  std::vector<Body> bodies;          // If branches
  Body body;
  Body else_body;

  Stmt(Kind k, int l, int col) : kind(k), line(l), column(col) {}
};

}  // namespace lockstep::chat
