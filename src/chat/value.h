// Values of the chat-template interpreter. They model the Python objects a Jinja2 template sees
// when Hugging Face renders a chat template: None, bool, int, float, str, list/tuple, dict
// (insertion-ordered, like Python's), callables, and Jinja's Undefined. Lists and dicts are shared
// (Python reference semantics), which is what lets `{% set ns.x = ... %}` mutate a namespace that
// an enclosing loop also sees.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace lockstep::chat {

class Value;

// A name that did not resolve. `hint` says what was missing, for the error raised when a template
// does something with it that Jinja2 refuses (attribute access, arithmetic, calling it).
struct Undefined {
  std::string hint;
};

struct List {
  std::vector<Value> items;
  bool is_tuple = false;  // only changes how it prints: (1, 2) instead of [1, 2]
};

// Insertion-ordered mapping. Chat-template dicts are small, so a linear scan beats hashing.
// `is_namespace` marks objects made by namespace() (attribute assignment allowed, no dict methods)
// and `is_object` marks attribute-only objects such as `loop` (no dict methods, not a mapping).
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  bool is_namespace = false;
  bool is_object = false;
  const Value* find(const Value& key) const;
  Value* find(const Value& key);
  const Value* find_key(const std::string& key) const;
  void set(Value key, Value value);
};

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
  // The i-th positional argument or the keyword `name`, or nullptr when neither was given.
  const Value* get(size_t i, const std::string& name) const;
};

struct Callable {
  std::string name;
  std::function<Value(const Args&)> call;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Callable };

  Value() : v_(Undefined{}) {}
  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  static Value none() { return Value(nullptr); }
  Value(bool b) : v_(b) {}
  Value(int64_t i) : v_(i) {}
  Value(int i) : v_(int64_t{i}) {}
  Value(double f) : v_(f) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::shared_ptr<List> l) : v_(std::move(l)) {}
  Value(std::shared_ptr<Dict> d) : v_(std::move(d)) {}
  Value(std::shared_ptr<Callable> c) : v_(std::move(c)) {}
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value function(std::string name, std::function<Value(const Args&)> fn);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return kind() == Kind::Float; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }  // Python: bool is an int
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_dict() const { return kind() == Kind::Dict; }
  bool is_mapping() const { return is_dict() && !dict().is_namespace && !dict().is_object; }
  bool is_callable() const { return kind() == Kind::Callable; }

  bool boolean() const { return std::get<bool>(v_); }
  int64_t integer() const { return is_bool() ? int64_t{boolean()} : std::get<int64_t>(v_); }
  double number() const { return is_float() ? std::get<double>(v_) : double(integer()); }
  const std::string& str() const { return std::get<std::string>(v_); }
  List& list() const { return *std::get<std::shared_ptr<List>>(v_); }
  Dict& dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  const Callable& callable() const { return *std::get<std::shared_ptr<Callable>>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }
  const void* identity() const;  // address of the shared object, for the `sameas` test

  bool truthy() const;                  // Python truthiness; Undefined is false
  std::string to_str() const;           // Python str(); Undefined prints as ""
  std::string repr() const;             // Python repr() (how items print inside a list)
  std::string type_name() const;        // Python's name for the type, for error messages

 private:
  explicit Value(Undefined u) : v_(std::move(u)) {}
  explicit Value(std::nullptr_t) : v_(nullptr) {}
  std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string, std::shared_ptr<List>,
               std::shared_ptr<Dict>, std::shared_ptr<Callable>>
      v_;
};

// Python ==. Numbers compare by value across int/float/bool; two Undefineds are equal.
bool equals(const Value& a, const Value& b);
// Python <. Throws lockstep::Error for types Python cannot order (str vs int, None, dicts).
bool less(const Value& a, const Value& b);
// Python len(); throws for values without a length. Undefined has length 0.
int64_t length(const Value& v);
// The items iterating the value yields: list items, dict keys, string characters; Undefined is
// empty. Throws for values that are not iterable.
std::vector<Value> iterate(const Value& v);

}  // namespace lockstep::chat
