// JsonPieces: canonical JSON strings, numbers and values as grammar rules.
#include "constraints/json_pieces.h"

#include <cmath>

#include "core/utf8.h"

namespace lockstep::constraints {

namespace {

const char* short_escape(char32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return nullptr;
  }
}

std::string escape_char(char32_t c) {
  if (const char* e = short_escape(c)) return e;
  if (c < 0x20) {
    static const char* hex = "0123456789abcdef";
    std::string out = "\\u00";
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 15]);
    return out;
  }
  std::string out;
  utf8::append(out, c);
  return out;
}

ExprPtr digit_class(char lo, char hi) {
  ByteSet s;
  for (char c = lo; c <= hi; ++c) s.set(static_cast<unsigned char>(c));
  return byte_set(s);
}

// Decimal strings of the same length between lo and hi (inclusive; lo <= hi).
ExprPtr same_length_range(const std::string& lo, const std::string& hi) {
  if (lo.size() == 1) return digit_class(lo[0], hi[0]);
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) return seq({digit_class(lo[0], lo[0]), same_length_range(lo_rest, hi_rest)});
  const std::string nines(lo_rest.size(), '9'), zeros(lo_rest.size(), '0');
  std::vector<ExprPtr> alts;
  char mid_lo = lo[0], mid_hi = hi[0];
  if (lo_rest != zeros) {
    alts.push_back(seq({digit_class(lo[0], lo[0]), same_length_range(lo_rest, nines)}));
    ++mid_lo;
  }
  ExprPtr high;
  if (hi_rest != nines) {
    high = seq({digit_class(hi[0], hi[0]), same_length_range(zeros, hi_rest)});
    --mid_hi;
  }
  if (mid_lo <= mid_hi)
    alts.push_back(seq({digit_class(mid_lo, mid_hi),
                        repeat(digit_class('0', '9'), static_cast<uint32_t>(lo_rest.size()),
                               static_cast<uint32_t>(lo_rest.size()))}));
  if (high) alts.push_back(high);
  return alt(std::move(alts));
}

// Non-negative integers in [lo, hi] written without leading zeros; hi nullopt: unbounded.
ExprPtr natural_range(uint64_t lo, std::optional<uint64_t> hi) {
  if (hi && *hi < lo) return never();
  const std::string a = std::to_string(lo);
  const size_t top_len = hi ? std::to_string(*hi).size() : a.size();
  std::vector<ExprPtr> alts;
  for (size_t len = a.size(); len <= top_len; ++len) {
    std::string from = a;
    if (len != a.size()) {
      from = std::string(len, '0');
      from[0] = '1';
    }
    std::string to = (hi && len == top_len) ? std::to_string(*hi) : std::string(len, '9');
    alts.push_back(same_length_range(from, to));
  }
  if (!hi)  // any number with more digits
    alts.push_back(seq({digit_class('1', '9'),
                        repeat(digit_class('0', '9'), static_cast<uint32_t>(a.size()), Expr::kUnbounded)}));
  return alt(std::move(alts));
}

}  // namespace

std::string json_escape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) out += escape_char(utf8::next(s, i));
  return out;
}

std::string json_quoted(std::string_view s) {
  std::string out = "\"";
  out += json_escape(s);
  out += '"';
  return out;
}

std::string json_canonical(const nlohmann::ordered_json& v) {
  switch (v.type()) {
    case nlohmann::ordered_json::value_t::string:
      return json_quoted(v.get_ref<const std::string&>());
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9007199254740992.0)
        return std::to_string(static_cast<int64_t>(d));
      return v.dump();
    }
    case nlohmann::ordered_json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        if (!first) out += ",";
        first = false;
        out += json_quoted(k);
        out += ':';
        out += json_canonical(x);
      }
      return out + "}";
    }
    case nlohmann::ordered_json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ',';
        out += json_canonical(v[i]);
      }
      return out + "]";
    }
    default:
      return v.dump();
  }
}

JsonPieces::JsonPieces(GrammarBuilder& builder, int max_whitespace)
    : b_(builder), max_ws_(max_whitespace) {}

uint32_t JsonPieces::rule(const char* name, uint32_t& slot) {
  if (slot == UINT32_MAX) slot = b_.add_rule(name);
  return slot;
}

ExprPtr JsonPieces::ws() {
  if (!ws_) {
    if (max_ws_ <= 0) {
      ws_ = empty();
    } else {
      ByteSet s;
      for (char c : {' ', '\t', '\n', '\r'}) s.set(static_cast<unsigned char>(c));
      const uint32_t r = b_.add_rule("ws");
      b_.define(r, repeat(byte_set(s), 0, static_cast<uint32_t>(max_ws_)));
      ws_ = ref(r);
    }
  }
  return ws_;
}

ExprPtr JsonPieces::string_char(const CodepointSet& set) {
  CodepointSet special = CodepointSet::range(0, 0x1F);
  special.add('"', '"');
  special.add('\\', '\\');
  std::vector<ExprPtr> alts{codepoints(set.minus(special))};
  const CodepointSet escaped = set.intersect(special);
  for (auto [lo, hi] : escaped.ranges())
    for (char32_t c = lo; c <= hi; ++c) alts.push_back(literal(escape_char(c)));
  return alt(std::move(alts));
}

ExprPtr JsonPieces::any_char() {
  if (!any_char_) {
    const uint32_t r = b_.add_rule("char");
    b_.define(r, string_char(CodepointSet::all_scalar_values()));
    any_char_ = ref(r);
  }
  return any_char_;
}

ExprPtr JsonPieces::any_string() {
  if (string_ == UINT32_MAX)
    b_.define(rule("string", string_), seq({literal("\""), repeat(any_char(), 0, Expr::kUnbounded), literal("\"")}));
  return ref(string_);
}

ExprPtr JsonPieces::integer() {
  if (integer_ == UINT32_MAX) b_.define(rule("integer", integer_), integer_range(std::nullopt, std::nullopt));
  return ref(integer_);
}

ExprPtr JsonPieces::number() {
  if (number_ == UINT32_MAX) {
    const ExprPtr digits = repeat(digit_class('0', '9'), 1, Expr::kUnbounded);
    ByteSet e, sign;
    e.set('e');
    e.set('E');
    sign.set('+');
    sign.set('-');
    const ExprPtr intpart = alt({literal("0"), seq({digit_class('1', '9'), repeat(digit_class('0', '9'), 0, Expr::kUnbounded)})});
    b_.define(rule("number", number_),
              seq({optional(literal("-")), intpart, optional(seq({literal("."), digits})),
                   optional(seq({byte_set(e), optional(byte_set(sign)), digits}))}));
  }
  return ref(number_);
}

ExprPtr JsonPieces::boolean() { return alt({literal("true"), literal("false")}); }
ExprPtr JsonPieces::null() { return literal("null"); }

ExprPtr JsonPieces::any_value() {
  if (value_ == UINT32_MAX) {
    rule("value", value_);
    b_.define(value_, alt({any_object(), any_array(), any_string(), number(), boolean(), null()}));
  }
  return ref(value_);
}

ExprPtr JsonPieces::any_object() {
  if (object_ == UINT32_MAX) {
    rule("object", object_);
    const ExprPtr member = seq({any_string(), ws(), literal(":"), ws(), any_value()});
    const ExprPtr more = seq({ws(), literal(","), ws(), member});
    b_.define(object_, seq({literal("{"), ws(), optional(seq({member, repeat(more, 0, Expr::kUnbounded), ws()})),
                            literal("}")}));
  }
  return ref(object_);
}

ExprPtr JsonPieces::any_array() {
  if (array_ == UINT32_MAX) {
    rule("array", array_);
    const ExprPtr more = seq({ws(), literal(","), ws(), any_value()});
    b_.define(array_, seq({literal("["), ws(), optional(seq({any_value(), repeat(more, 0, Expr::kUnbounded), ws()})),
                           literal("]")}));
  }
  return ref(array_);
}

ExprPtr JsonPieces::string_literal(std::string_view utf8) {
  return literal(json_quoted(utf8));
}

ExprPtr JsonPieces::integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi) return never();
  std::vector<ExprPtr> alts;
  // Non-negative part: [max(lo, 0), hi].
  if (!hi || *hi >= 0) {
    const uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> b;
    if (hi) b = static_cast<uint64_t>(*hi);
    alts.push_back(natural_range(a, b));
  }
  // Negative part: -k for k in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const uint64_t a = hi && *hi < 0 ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
    std::optional<uint64_t> b;
    if (lo) b = static_cast<uint64_t>(-(*lo + 1)) + 1;
    alts.push_back(seq({literal("-"), natural_range(a, b)}));
  }
  return alt(std::move(alts));
}

}  // namespace lockstep::constraints
