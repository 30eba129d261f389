#include "server/tools/llama3_parser.h"

#include "server/tools/call_text.h"
#include "server/tools/pythonic_calls.h"

namespace lockstep::server::tools {

namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kPythonStart = "<|python_start|>", kPythonEnd = "<|python_end|>";
constexpr const char* kSpace = " \t\r\n";

// The calls of `body` (objects separated by whitespace or ';'), or nullopt.
std::optional<std::vector<ToolCall>> parse_calls(std::string_view body) {
  std::vector<ToolCall> calls;
  size_t pos = 0;
  for (;;) {
    pos = body.find_first_not_of(kSpace, pos);
    if (pos == std::string_view::npos) break;
    if (!calls.empty()) {
      if (body[pos] != ';') return std::nullopt;
      pos = body.find_first_not_of(kSpace, pos + 1);
      if (pos == std::string_view::npos) break;  // a trailing ';'
    }
    const size_t end = json_container_end(body, pos);
    if (end == std::string_view::npos || body[pos] != '{') return std::nullopt;
    auto j = parse_json(body.substr(pos, end - pos));
    if (!j) return std::nullopt;
    // Llama's templates ask for "parameters"; some fine-tunes write "arguments".
    auto call = call_from_object(*j, j->contains("parameters") ? "parameters" : "arguments");
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    pos = end;
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// The answer's call text with its tags removed (`tagged`: it had one), or the answer itself.
std::string_view untagged(std::string_view rest, bool& tagged) {
  tagged = true;
  if (rest.starts_with(kPythonTag)) return rest.substr(kPythonTag.size());
  if (rest.starts_with(kPythonStart)) {
    std::string_view body = rest.substr(kPythonStart.size());
    const size_t last = body.find_last_not_of(kSpace);
    if (last != std::string_view::npos && body.substr(0, last + 1).ends_with(kPythonEnd))
      body = body.substr(0, last + 1 - kPythonEnd.size());
    return body;
  }
  tagged = false;
  return rest;
}

}  // namespace

std::vector<ToolSegment> Llama3Parser::scan(std::string_view text, bool final) const {
  std::vector<ToolSegment> out;
  const size_t start = text.find_first_not_of(kSpace);
  const std::string_view rest = start == std::string_view::npos ? std::string_view() : text.substr(start);
  bool tagged = false;
  const std::string_view body = untagged(rest, tagged);
  const bool candidate = tagged || rest.starts_with('{') || rest.starts_with('[');
  if (!final) {
    // Undecided while the answer may still be a call: blank so far, a call's start, or the
    // start of a tag.
    if (rest.empty() || candidate || kPythonTag.starts_with(rest) || kPythonStart.starts_with(rest)) return out;
    out.push_back(ToolSegment::of_text(std::string(text)));
    return out;
  }
  if (candidate) {
    const size_t first = body.find_first_not_of(kSpace);
    const bool pythonic = first != std::string_view::npos && body[first] == '[';
    if (auto calls = pythonic ? parse_pythonic_calls(body) : parse_calls(body)) {
      for (auto& c : *calls) out.push_back(ToolSegment::of_call(std::move(c)));
      return out;
    }
  }
  if (!text.empty()) out.push_back(ToolSegment::of_text(std::string(text)));
  return out;
}

}  // namespace lockstep::server::tools
