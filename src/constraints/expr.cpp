// Expression constructors and code-point sets; codepoints() turns a set of characters into
// UTF-8 byte-range sequences.
#include "constraints/expr.h"

#include <algorithm>

#include "core/utf8.h"

namespace lockstep::constraints {

namespace {

constexpr char32_t kMaxScalar = 0x10FFFF;

std::shared_ptr<Expr> make(Expr::Kind kind) {
  auto e = std::make_shared<Expr>();
  e->kind = kind;
  return e;
}

// Appends to `out` the byte-range sequences of [lo, hi], whose characters all have the same
// UTF-8 length. Splits the range until, in each piece, every byte position varies independently
// over a contiguous range (then the piece is one sequence of byte ranges).
void split_same_length(char32_t lo, char32_t hi, std::vector<ExprPtr>& out) {
  std::string a, b;
  utf8::append(a, lo);
  const size_t n = a.size();
  for (size_t i = 1; i < n; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, out);
        split_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, out);
        split_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  utf8::append(b, hi);
  std::vector<ExprPtr> bytes;
  for (size_t k = 0; k < n; ++k) {
    ByteSet s;
    for (unsigned v = static_cast<uint8_t>(a[k]); v <= static_cast<uint8_t>(b[k]); ++v) s.set(v);
    bytes.push_back(byte_set(s));
  }
  out.push_back(seq(std::move(bytes)));
}

}  // namespace

CodepointSet CodepointSet::range(char32_t lo, char32_t hi) {
  CodepointSet s;
  s.add(lo, hi);
  return s;
}

CodepointSet CodepointSet::all_scalar_values() {
  CodepointSet s;
  s.add(0, 0xD7FF);
  s.add(0xE000, kMaxScalar);
  return s;
}

void CodepointSet::add(char32_t lo, char32_t hi) {
  if (lo > hi) return;
  ranges_.emplace_back(lo, hi);
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<char32_t, char32_t>> merged;
  for (const auto& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  ranges_ = std::move(merged);
}

void CodepointSet::add(const CodepointSet& other) {
  for (const auto& r : other.ranges_) add(r.first, r.second);
}

CodepointSet CodepointSet::complement() const { return all_scalar_values().minus(*this); }

CodepointSet CodepointSet::minus(const CodepointSet& other) const {
  CodepointSet out;
  for (auto [lo, hi] : ranges_) {
    char32_t cur = lo;
    bool done = false;
    for (const auto& [olo, ohi] : other.ranges_) {
      if (ohi < cur || olo > hi) continue;
      if (olo > cur) out.add(cur, olo - 1);
      if (ohi >= hi) {
        done = true;
        break;
      }
      cur = ohi + 1;
    }
    if (!done) out.add(cur, hi);
  }
  return out;
}

CodepointSet CodepointSet::intersect(const CodepointSet& other) const {
  return minus(minus(other));
}

bool CodepointSet::contains(char32_t c) const {
  for (const auto& r : ranges_)
    if (c >= r.first && c <= r.second) return true;
  return false;
}

ExprPtr empty() {
  static const ExprPtr e = make(Expr::Kind::kEmpty);
  return e;
}

ExprPtr never() {
  static const ExprPtr e = make(Expr::Kind::kNever);
  return e;
}

ExprPtr byte_set(const ByteSet& bytes) {
  if (bytes.none()) return never();
  auto e = make(Expr::Kind::kByte);
  e->bytes = bytes;
  return e;
}

ExprPtr literal(std::string_view bytes) {
  std::vector<ExprPtr> items;
  for (unsigned char c : bytes) {
    ByteSet s;
    s.set(c);
    items.push_back(byte_set(s));
  }
  return seq(std::move(items));
}

ExprPtr seq(std::vector<ExprPtr> items) {
  auto e = make(Expr::Kind::kSeq);
  for (auto& item : items) {
    if (item->kind == Expr::Kind::kEmpty) continue;
    if (item->kind == Expr::Kind::kNever) return never();
    if (item->kind == Expr::Kind::kSeq)
      e->items.insert(e->items.end(), item->items.begin(), item->items.end());
    else
      e->items.push_back(std::move(item));
  }
  if (e->items.empty()) return empty();
  if (e->items.size() == 1) return e->items[0];
  return e;
}

ExprPtr alt(std::vector<ExprPtr> items) {
  auto e = make(Expr::Kind::kAlt);
  for (auto& item : items) {
    if (item->kind == Expr::Kind::kNever) continue;
    if (item->kind == Expr::Kind::kAlt)
      e->items.insert(e->items.end(), item->items.begin(), item->items.end());
    else
      e->items.push_back(std::move(item));
  }
  if (e->items.empty()) return never();
  if (e->items.size() == 1) return e->items[0];
  return e;
}

ExprPtr repeat(ExprPtr item, uint32_t min, uint32_t max) {
  if (max != Expr::kUnbounded && min > max) return never();
  if (max == 0 || item->kind == Expr::Kind::kEmpty) return empty();
  if (item->kind == Expr::Kind::kNever) return min == 0 ? empty() : never();
  if (min == 1 && max == 1) return item;
  auto e = make(Expr::Kind::kRepeat);
  e->items.push_back(std::move(item));
  e->min = min;
  e->max = max;
  return e;
}

ExprPtr optional(ExprPtr item) { return repeat(std::move(item), 0, 1); }

ExprPtr ref(uint32_t rule) {
  auto e = make(Expr::Kind::kRef);
  e->rule = rule;
  return e;
}

ExprPtr codepoints(const CodepointSet& set) {
  static constexpr char32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, kMaxScalar};
  std::vector<ExprPtr> out;
  for (auto [lo, hi] : set.ranges()) {
    hi = std::min(hi, kMaxScalar);
    char32_t start = 0;
    for (char32_t end : kLengthEnds) {
      const char32_t a = std::max(lo, start), b = std::min(hi, end);
      if (a <= b) {
        // Surrogates have no UTF-8 form: cut them out of the 3-byte range.
        if (end == 0xFFFF) {
          if (a < 0xD800) split_same_length(a, std::min(b, char32_t{0xD7FF}), out);
          if (b > 0xDFFF) split_same_length(std::max(a, char32_t{0xE000}), b, out);
        } else {
          split_same_length(a, b, out);
        }
      }
      start = end + 1;
    }
  }
  return alt(std::move(out));
}

}  // namespace lockstep::constraints
