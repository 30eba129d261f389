#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"

namespace lockstep {
namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const std::string& s, const std::string& where) {
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  fail(where, ": unknown split behavior \"", s,
       "\" (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous)");
}

struct Segment {
  size_t b, e;
  bool match;  // true for a delimiter match (before inversion: the regex matched here)
};

// Cuts `text` at the regex matches and groups delimiters and the rest according to `behavior`,
// reproducing NormalizedString::split of the reference library.
void split(const Regex& re, bool invert, Behavior behavior, const Piece& in,
           std::vector<Piece>& out) {
  const std::string& t = in.text;
  std::vector<Segment> segs;
  if (t.empty()) {
    segs.push_back({0, 0, false});
  } else {
    size_t prev = 0;
    for (auto [b, e] : re.find_all(t)) {
      if (prev != b) segs.push_back({prev, b, false});
      segs.push_back({b, e, true});
      prev = e;
    }
    if (prev != t.size()) segs.push_back({prev, t.size(), false});
  }
  if (invert)
    for (auto& s : segs) s.match = !s.match;

  std::vector<std::pair<size_t, size_t>> keep;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kRemoved:
      for (auto& s : segs)
        if (!s.match) keep.emplace_back(s.b, s.e);
      break;
    case Behavior::kIsolated:
      for (auto& s : segs) keep.emplace_back(s.b, s.e);
      break;
    case Behavior::kContiguous:
      for (auto& s : segs) {
        if (s.match == previous_match && !keep.empty())
          keep.back().second = s.e;
        else
          keep.emplace_back(s.b, s.e);
        previous_match = s.match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (auto& s : segs) {
        if (s.match && !previous_match && !keep.empty())
          keep.back().second = s.e;
        else
          keep.emplace_back(s.b, s.e);
        previous_match = s.match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (size_t k = segs.size(); k-- > 0;) {
        const auto& s = segs[k];
        if (s.match && !previous_match && !keep.empty())
          keep.back().first = s.b;
        else
          keep.emplace_back(s.b, s.e);
        previous_match = s.match;
      }
      std::reverse(keep.begin(), keep.end());
      break;
  }
  bool first = true;
  for (auto [b, e] : keep) {
    if (b == e) continue;
    out.push_back({t.substr(b, e - b), in.at_origin && first && b == 0});
    first = false;
  }
}

// The regex ByteLevel uses when use_regex is true (GPT-2's word splitter).
const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

struct PreTokenizer::Step {
  enum Kind { kSplit, kByteLevel, kMetaspace } kind;
  std::unique_ptr<Regex> regex;
  bool invert = false;
  Behavior behavior = Behavior::kIsolated;
  bool add_prefix_space = false;
  std::string replacement;            // Metaspace
  enum { kAlways, kFirst, kNever } prepend = kAlways;
  bool metaspace_split = true;
};

PreTokenizer::~PreTokenizer() = default;

std::unique_ptr<PreTokenizer> PreTokenizer::load(const tok::json& j, const std::string& where) {
  auto p = std::unique_ptr<PreTokenizer>(new PreTokenizer);
  if (!j.is_null()) p->add(j, where);
  return p;
}

void PreTokenizer::add(const tok::json& j, const std::string& where) {
  const std::string type = tok::string_field(j, "type", where);
  auto s = std::make_unique<Step>();
  if (type == "Sequence") {
    const auto& list = tok::array_field(j, "pretokenizers", where);
    for (size_t i = 0; i < list.size(); ++i)
      add(list[i], where + ".pretokenizers[" + std::to_string(i) + "]");
    return;
  } else if (type == "Split") {
    s->kind = Step::kSplit;
    s->regex = std::make_unique<Regex>(tok::pattern_field(j, "pattern", where),
                                       tok::sub(where, "pattern"));
    s->invert = tok::bool_or(j, "invert", where, false);
    s->behavior = parse_behavior(tok::string_field(j, "behavior", where),
                                 tok::sub(where, "behavior"));
  } else if (type == "ByteLevel") {
    s->kind = Step::kByteLevel;
    s->add_prefix_space = tok::bool_or(j, "add_prefix_space", where, true);
    if (tok::bool_or(j, "use_regex", where, true))
      s->regex = std::make_unique<Regex>(kGpt2Pattern, where);
  } else if (type == "Metaspace") {
    s->kind = Step::kMetaspace;
    s->replacement = tok::string_or(j, "replacement", where, "\xE2\x96\x81");
    const std::string scheme = tok::string_or(
        j, "prepend_scheme", where,
        tok::bool_or(j, "add_prefix_space", where, true) ? "always" : "never");
    if (scheme == "always") s->prepend = Step::kAlways;
    else if (scheme == "first") s->prepend = Step::kFirst;
    else if (scheme == "never") s->prepend = Step::kNever;
    else fail(tok::sub(where, "prepend_scheme"), ": expected always, first or never");
    s->metaspace_split = tok::bool_or(j, "split", where, true);
    s->regex = std::make_unique<Regex>(Regex::escape(s->replacement), where);
  } else if (type == "Digits") {
    s->kind = Step::kSplit;
    s->regex = std::make_unique<Regex>("\\p{N}", where);
    s->behavior = tok::bool_or(j, "individual_digits", where, false) ? Behavior::kIsolated
                                                                     : Behavior::kContiguous;
  } else if (type == "WhitespaceSplit") {
    s->kind = Step::kSplit;
    s->regex = std::make_unique<Regex>("\\s", where);
    s->behavior = Behavior::kRemoved;
  } else if (type == "Whitespace") {
    s->kind = Step::kSplit;
    s->regex = std::make_unique<Regex>("\\w+|[^\\w\\s]+", where);
    s->invert = true;
    s->behavior = Behavior::kRemoved;
  } else {
    fail(tok::sub(where, "type"), ": unsupported pre-tokenizer \"", type,
         "\" (supported: Sequence, Split, ByteLevel, Metaspace, Digits, Whitespace, "
         "WhitespaceSplit)");
  }
  steps_.push_back(std::move(s));
}

void PreTokenizer::apply(std::vector<Piece>& pieces) const {
  std::vector<Piece> next;
  for (const auto& s : steps_) {
    next.clear();
    next.reserve(pieces.size());
    for (auto& p : pieces) {
      switch (s->kind) {
        case Step::kSplit:
          split(*s->regex, s->invert, s->behavior, p, next);
          break;
        case Step::kByteLevel: {
          if (s->add_prefix_space && (p.text.empty() || p.text[0] != ' ')) p.text = " " + p.text;
          const size_t first = next.size();
          if (s->regex)
            split(*s->regex, false, Behavior::kIsolated, p, next);
          else if (!p.text.empty())
            next.push_back(std::move(p));
          for (size_t k = first; k < next.size(); ++k)
            next[k].text = byte_level::encode(next[k].text);
          break;
        }
        case Step::kMetaspace: {
          std::string t;
          t.reserve(p.text.size() + 3);
          for (char c : p.text) {
            if (c == ' ')
              t += s->replacement;
            else
              t += c;
          }
          const bool starts = t.compare(0, s->replacement.size(), s->replacement) == 0;
          if (!starts && (s->prepend == Step::kAlways ||
                          (s->prepend == Step::kFirst && p.at_origin)))
            t = s->replacement + t;
          p.text = std::move(t);
          if (s->metaspace_split)
            split(*s->regex, false, Behavior::kMergedWithNext, p, next);
          else if (!p.text.empty())
            next.push_back(std::move(p));
          break;
        }
      }
    }
    pieces.swap(next);
  }
}

}  // namespace lockstep
