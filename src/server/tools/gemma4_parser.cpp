#include "server/tools/gemma4_parser.h"

#include "server/tools/call_text.h"

namespace lockstep::server::tools {

namespace {

constexpr std::string_view kQuote = "<|\"|>";
constexpr const char* kSpace = " \t\r\n";

// Recursive descent over the Gemma 4 argument notation; every step returns false on bad input.
class ValueReader {
 public:
  explicit ValueReader(std::string_view s) : s_(s) {}

  bool value(Json& out, int depth = 0) {
    if (depth > 64) return false;  // nesting a client schema could never need
    skip();
    if (at_end()) return false;
    if (s_.substr(i_).starts_with(kQuote)) {
      std::string str;
      if (!quoted(str)) return false;
      out = std::move(str);
      return true;
    }
    if (s_[i_] == '{') return object(out, depth);
    if (s_[i_] == '[') return array(out, depth);
    return scalar(out);
  }

  bool object(Json& out, int depth) {
    out = Json::object();
    ++i_;  // '{'
    skip();
    if (!at_end() && s_[i_] == '}') return ++i_, true;
    for (;;) {
      std::string key;
      skip();
      if (at_end()) return false;
      if (s_.substr(i_).starts_with(kQuote)) {
        if (!quoted(key)) return false;
      } else {
        const size_t colon = s_.find(':', i_);
        if (colon == std::string_view::npos) return false;
        key = std::string(trim(s_.substr(i_, colon - i_)));
        i_ = colon;
      }
      skip();
      if (key.empty() || at_end() || s_[i_] != ':') return false;
      ++i_;
      Json v;
      if (!value(v, depth + 1)) return false;
      out[key] = std::move(v);
      skip();
      if (at_end()) return false;
      if (s_[i_] == '}') return ++i_, true;
      if (s_[i_] != ',') return false;
      ++i_;
    }
  }

  bool array(Json& out, int depth) {
    out = Json::array();
    ++i_;  // '['
    skip();
    if (!at_end() && s_[i_] == ']') return ++i_, true;
    for (;;) {
      Json v;
      if (!value(v, depth + 1)) return false;
      out.push_back(std::move(v));
      skip();
      if (at_end()) return false;
      if (s_[i_] == ']') return ++i_, true;
      if (s_[i_] != ',') return false;
      ++i_;
    }
  }

  // A bare token up to the next delimiter: a JSON number, true, false or null.
  bool scalar(Json& out) {
    const size_t end = s_.find_first_of(",}]", i_);
    const std::string_view tok = trim(s_.substr(i_, end == std::string_view::npos ? std::string_view::npos : end - i_));
    auto j = parse_json(tok);
    if (tok.empty() || !j || j->is_structured() || j->is_string()) return false;
    out = std::move(*j);
    i_ = end == std::string_view::npos ? s_.size() : end;
    return true;
  }

  bool quoted(std::string& out) {
    i_ += kQuote.size();
    const size_t close = s_.find(kQuote, i_);
    if (close == std::string_view::npos) return false;
    out = std::string(s_.substr(i_, close - i_));
    i_ = close + kQuote.size();
    return true;
  }

  void skip() {
    while (!at_end() && std::string_view(kSpace).find(s_[i_]) != std::string_view::npos) ++i_;
  }
  bool at_end() const { return i_ >= s_.size(); }
  size_t pos() const { return i_; }

  static std::string_view trim(std::string_view s) {
    const size_t b = s.find_first_not_of(kSpace);
    if (b == std::string_view::npos) return {};
    return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::optional<ToolCall> Gemma4Parser::parse_call(std::string_view body) {
  constexpr std::string_view kCall = "call:";
  body = ValueReader::trim(body);
  if (!body.starts_with(kCall)) return std::nullopt;
  const size_t brace = body.find('{');
  if (brace == std::string_view::npos) return std::nullopt;
  const std::string_view name = ValueReader::trim(body.substr(kCall.size(), brace - kCall.size()));
  if (name.empty() || name.find_first_of(kSpace) != std::string_view::npos) return std::nullopt;
  ValueReader r(body.substr(brace));
  Json args;
  if (!r.object(args, 0)) return std::nullopt;
  r.skip();
  if (!r.at_end()) return std::nullopt;  // text after the arguments
  return ToolCall{std::string(name), args.dump()};
}

std::vector<ToolSegment> Gemma4Parser::scan(std::string_view text, bool final) const {
  return scan_blocks(text, final, "<|tool_call>", "<tool_call|>",
                     [](std::string_view body) -> std::optional<std::vector<ToolCall>> {
                       auto call = parse_call(body);
                       if (!call) return std::nullopt;
                       return std::vector<ToolCall>{std::move(*call)};
                     });
}

}  // namespace lockstep::server::tools
