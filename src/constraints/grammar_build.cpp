// GrammarBuilder::build: lowers expressions to rules of element runs, prunes what derives
// nothing, refuses left recursion, and lays the result out flat.
#include <functional>
#include <unordered_map>

#include "constraints/grammar.h"
#include "core/error.h"

namespace lockstep::constraints {

namespace {

using Alt = std::vector<Element>;

struct LoweredRule {
  std::string name;
  std::vector<Alt> alts;
};

class Lowerer {
 public:
  explicit Lowerer(std::vector<LoweredRule>& rules) : rules_(rules) {}

  std::vector<Alt> alternatives(const ExprPtr& e, const std::string& ctx) {
    std::vector<Alt> alts;
    if (e->kind == Expr::Kind::kAlt) {
      for (const auto& item : e->items) alts.push_back(sequence(item, ctx));
    } else {
      alts.push_back(sequence(e, ctx));
    }
    return alts;
  }

  std::vector<ByteSet> byte_sets;

 private:
  Alt sequence(const ExprPtr& e, const std::string& ctx) {
    Alt out;
    lower_into(e, out, ctx);
    return out;
  }

  void push(Alt& out, Element el) {
    if (++total_ > GrammarBuilder::kMaxElements)
      fail("constraint too large: more than ", GrammarBuilder::kMaxElements,
           " grammar elements (a repetition count or length limit is too big)");
    out.push_back(el);
  }

  uint32_t bytes_index(const ByteSet& s) {
    auto [it, inserted] = byte_index_.try_emplace(s, static_cast<uint32_t>(byte_sets.size()));
    if (inserted) byte_sets.push_back(s);
    return it->second;
  }

  uint32_t new_rule(std::string name, std::vector<Alt> alts) {
    rules_.push_back({std::move(name), std::move(alts)});
    return static_cast<uint32_t>(rules_.size() - 1);
  }

  // One element standing for `e`: itself when it is a terminal or a reference, else a helper
  // rule (one per expression object, so a shared sub-expression is lowered once).
  Element atom(const ExprPtr& e, const std::string& ctx) {
    if (e->kind == Expr::Kind::kByte) return {Element::Kind::kBytes, bytes_index(e->bytes)};
    if (e->kind == Expr::Kind::kRef) return {Element::Kind::kRule, e->rule};
    if (e->kind == Expr::Kind::kNever) return {Element::Kind::kBytes, bytes_index(ByteSet{})};
    auto it = atoms_.find(e.get());
    if (it != atoms_.end()) return {Element::Kind::kRule, it->second};
    const std::string name = ctx + "-" + std::to_string(++helpers_);
    const uint32_t id = new_rule(name, {});
    rules_[id].alts = alternatives(e, name);
    atoms_.emplace(e.get(), id);
    return {Element::Kind::kRule, id};
  }

  void lower_into(const ExprPtr& e, Alt& out, const std::string& ctx) {
    switch (e->kind) {
      case Expr::Kind::kEmpty:
        return;
      case Expr::Kind::kSeq:
        for (const auto& item : e->items) lower_into(item, out, ctx);
        return;
      case Expr::Kind::kRepeat: {
        const Element x = atom(e->items[0], ctx);
        for (uint32_t i = 0; i < e->min; ++i) push(out, x);
        if (e->max == Expr::kUnbounded) {
          // S ::= x S | ()   (right recursive; the matcher's tail call keeps its stack flat)
          const uint32_t s = new_rule(ctx + "-" + std::to_string(++helpers_), {});
          rules_[s].alts = {Alt{x, {Element::Kind::kRule, s}}, Alt{}};
          push(out, {Element::Kind::kRule, s});
        } else if (e->max > e->min) {
          // O_k ::= x O_{k-1} | ()   for up to max - min more copies
          uint32_t prev = UINT32_MAX;
          for (uint32_t k = 0; k < e->max - e->min; ++k) {
            Alt a{x};
            if (prev != UINT32_MAX) a.push_back({Element::Kind::kRule, prev});
            total_ += a.size();
            prev = new_rule(ctx + "-" + std::to_string(++helpers_), {std::move(a), Alt{}});
          }
          push(out, {Element::Kind::kRule, prev});
        }
        return;
      }
      default:
        push(out, atom(e, ctx));
    }
  }

  std::vector<LoweredRule>& rules_;
  std::unordered_map<ByteSet, uint32_t> byte_index_;
  std::unordered_map<const Expr*, uint32_t> atoms_;
  size_t total_ = 0;
  size_t helpers_ = 0;
};

// Removes alternatives using a rule (or an empty byte set) that derives no finite string.
void prune_unproductive(std::vector<LoweredRule>& rules, const std::vector<ByteSet>& sets) {
  std::vector<char> productive(rules.size(), 0);
  auto element_ok = [&](const Element& el) {
    return el.kind == Element::Kind::kBytes ? sets[el.value].any() : productive[el.value] != 0;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (productive[r]) continue;
      for (const Alt& a : rules[r].alts) {
        bool ok = true;
        for (const Element& el : a) ok = ok && element_ok(el);
        if (ok) {
          productive[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  for (auto& rule : rules) {
    std::vector<Alt> kept;
    for (Alt& a : rule.alts) {
      bool ok = true;
      for (const Element& el : a) ok = ok && element_ok(el);
      if (ok) kept.push_back(std::move(a));
    }
    rule.alts = std::move(kept);
  }
}

// A rule that can reach itself through the leading (nullable-prefixed) elements of its
// alternatives would make the matcher's expansion loop forever.
void refuse_left_recursion(const std::vector<LoweredRule>& rules, uint32_t root) {
  std::vector<char> nullable(rules.size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const Alt& a : rules[r].alts) {
        bool all = true;
        for (const Element& el : a) all = all && el.kind == Element::Kind::kRule && nullable[el.value];
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  std::vector<char> mark(rules.size(), 0);  // 0 new, 1 on the path, 2 done
  std::vector<uint32_t> path;
  std::function<void(uint32_t)> visit = [&](uint32_t r) {
    mark[r] = 1;
    path.push_back(r);
    for (const Alt& a : rules[r].alts) {
      for (const Element& el : a) {
        if (el.kind != Element::Kind::kRule) break;
        if (mark[el.value] == 1) {
          std::string chain;
          for (uint32_t p : path) chain += rules[p].name + " -> ";
          fail("grammar: left recursion (", chain, rules[el.value].name,
               "): a rule may not derive itself before consuming a character");
        }
        if (mark[el.value] == 0) visit(el.value);
        if (!nullable[el.value]) break;
      }
    }
    path.pop_back();
    mark[r] = 2;
  };
  visit(root);
  // Rules reached only after a terminal are checked from their own start.
  for (uint32_t r = 0; r < rules.size(); ++r)
    if (mark[r] == 0) visit(r);
}

}  // namespace

uint32_t GrammarBuilder::add_rule(std::string name) {
  names_.push_back(std::move(name));
  bodies_.push_back(nullptr);
  return static_cast<uint32_t>(names_.size() - 1);
}

void GrammarBuilder::define(uint32_t rule, ExprPtr body) { bodies_.at(rule) = std::move(body); }

Grammar GrammarBuilder::build(uint32_t root) {
  std::vector<LoweredRule> rules(names_.size());
  Lowerer lower(rules);
  for (size_t r = 0; r < names_.size(); ++r) {
    if (!bodies_[r]) fail("grammar: rule '", names_[r], "' is used but never defined");
    rules[r].name = names_[r];
  }
  for (size_t r = 0; r < names_.size(); ++r) {
    auto alts = lower.alternatives(bodies_[r], names_[r]);
    rules[r].alts = std::move(alts);
  }
  prune_unproductive(rules, lower.byte_sets);
  if (rules[root].alts.empty()) fail(kEmptyLanguage, ": no string satisfies it");
  refuse_left_recursion(rules, root);

  Grammar g;
  g.byte_sets = std::move(lower.byte_sets);
  g.root = root;
  g.rule_alts.resize(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    g.rule_names.push_back(rules[r].name);
    for (const Alt& a : rules[r].alts) {
      g.rule_alts[r].push_back(static_cast<uint32_t>(g.elements.size()));
      g.elements.insert(g.elements.end(), a.begin(), a.end());
      g.elements.push_back({Element::Kind::kEnd, 0});
    }
  }
  return g;
}

std::string Grammar::dump() const {
  auto set_text = [](const ByteSet& s) {
    std::string out = "[";
    for (unsigned lo = 0; lo < 256; ++lo) {
      if (!s.test(lo)) continue;
      unsigned hi = lo;
      while (hi + 1 < 256 && s.test(hi + 1)) ++hi;
      auto one = [&](unsigned v) {
        if (v >= 0x21 && v < 0x7F && v != ']' && v != '\\' && v != '-') {
          out += static_cast<char>(v);
        } else {
          static const char* hex = "0123456789ABCDEF";
          out += "\\x";
          out += hex[v >> 4];
          out += hex[v & 15];
        }
      };
      one(lo);
      if (hi > lo) {
        out += '-';
        one(hi);
      }
      lo = hi;
    }
    return out + "]";
  };
  std::string out;
  for (size_t r = 0; r < rule_alts.size(); ++r) {
    out += rule_names[r] + " ::=";
    for (size_t a = 0; a < rule_alts[r].size(); ++a) {
      if (a) out += " |";
      for (uint32_t p = rule_alts[r][a]; elements[p].kind != Element::Kind::kEnd; ++p)
        out += " " + (elements[p].kind == Element::Kind::kRule ? rule_names[elements[p].value]
                                                               : set_text(bytes_at(p)));
      if (elements[rule_alts[r][a]].kind == Element::Kind::kEnd) out += " ()";
    }
    out += "\n";
  }
  return out;
}

}  // namespace lockstep::constraints
