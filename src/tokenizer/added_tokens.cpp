#include "tokenizer/added_tokens.h"

#include <utf8proc.h>

#include <algorithm>

#include "core/utf8.h"

namespace lockstep {

struct AddedTokenMatcher::Node {
  std::vector<std::pair<unsigned char, uint32_t>> children;  // sorted by byte
  int64_t token = -1;
};

AddedTokenMatcher::AddedTokenMatcher() : nodes_(1) {}
AddedTokenMatcher::~AddedTokenMatcher() = default;

bool AddedTokenMatcher::empty() const { return nodes_.size() == 1; }

void AddedTokenMatcher::add(std::string_view pattern, size_t token_index) {
  if (pattern.empty()) return;
  uint32_t n = 0;
  for (unsigned char c : pattern) {
    auto& ch = nodes_[n].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(c, uint32_t{0}),
                               [](auto& x, auto& y) { return x.first < y.first; });
    if (it != ch.end() && it->first == c) {
      n = it->second;
    } else {
      const auto child = static_cast<uint32_t>(nodes_.size());
      ch.insert(it, {c, child});
      nodes_.emplace_back();
      n = child;
    }
  }
  // When two tokens share a string the later one wins, as in the reference's map.
  nodes_[n].token = static_cast<int64_t>(token_index);
}

std::optional<std::pair<size_t, size_t>> AddedTokenMatcher::longest_at(std::string_view text,
                                                                        size_t at) const {
  std::optional<std::pair<size_t, size_t>> best;
  uint32_t n = 0;
  for (size_t i = at; i < text.size(); ++i) {
    const auto& ch = nodes_[n].children;
    const auto c = static_cast<unsigned char>(text[i]);
    auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(c, uint32_t{0}),
                               [](auto& x, auto& y) { return x.first < y.first; });
    if (it == ch.end() || it->first != c) break;
    n = it->second;
    if (nodes_[n].token >= 0) best = {i + 1 - at, static_cast<size_t>(nodes_[n].token)};
  }
  return best;
}

namespace {

// Word characters for single_word, as Rust regex's \w: letters, marks, digits, connectors.
bool is_word_char(std::string_view s, size_t at) {
  size_t i = at;
  const char32_t c = utf8::next(s, i);
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return is_word_char(s, i);
}

bool is_space(std::string_view s, size_t at, size_t* len) {
  size_t i = at;
  const char32_t c = utf8::next(s, i);
  *len = i - at;
  return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

}  // namespace

std::vector<AddedTokenMatcher::Span> AddedTokenMatcher::split(
    std::string_view text, const std::vector<AddedToken>& tokens) const {
  std::vector<Span> out;
  size_t start_offset = 0;
  size_t at = 0;
  while (at < text.size()) {
    const auto m = longest_at(text, at);
    if (!m) {
      ++at;
      continue;
    }
    size_t b = at, e = at + m->first;
    const AddedToken& t = tokens[m->second];
    // The reference's leftmost-longest iterator resumes after this match even when the rules
    // below reject it.
    at = e;
    if (t.single_word) {
      const bool start_space = b == 0 || !ends_with_word(text.substr(0, b));
      const bool stop_space = e == text.size() || !is_word_char(text, e);
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t nb = b;
      while (nb > 0) {
        size_t s = nb - 1, len = 0;
        while (s > 0 && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
        if (!is_space(text, s, &len)) break;
        nb = s;
      }
      b = std::max(nb, start_offset);
    }
    if (t.rstrip) {
      size_t len = 0;
      while (e < text.size() && is_space(text, e, &len)) e += len;
      at = e;
    }
    if (start_offset < b) out.push_back({start_offset, b, -1});
    out.push_back({b, e, static_cast<int64_t>(m->second)});
    start_offset = e;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
  return out;
}

}  // namespace lockstep
