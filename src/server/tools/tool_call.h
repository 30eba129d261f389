// Tool calls in a chat answer. A model writes its calls as text in its family's syntax
// (<tool_call>{...}</tool_call>, [TOOL_CALLS]..., <|tool_call>call:...); a ToolCallParser cuts
// the answer into segments, text and calls, and assemble_tool_output() turns those into the
// OpenAI message: content (the text outside the calls) and tool_calls (name, JSON arguments).
//
// Streaming works on the same functions: scan(prefix, /*final=*/false) returns only the segments
// that no continuation of the prefix can change (a tail that may still open a call is held
// back), so the segments seen while streaming are a prefix of the whole answer's segments and
// the streamed deltas assemble to exactly the non-streamed message (ToolCallStream).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::server::tools {

using Json = nlohmann::ordered_json;

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text, as OpenAI sends function.arguments
  bool operator==(const ToolCall&) const = default;
};

struct ToolSegment {
  enum class Kind { kText, kCall };
  Kind kind = Kind::kText;
  std::string text;  // kText
  ToolCall call;     // kCall

  static ToolSegment of_text(std::string t) { return {Kind::kText, std::move(t), {}}; }
  static ToolSegment of_call(ToolCall c) { return {Kind::kCall, {}, std::move(c)}; }
};

// A tool the request offers, as the parsers and the call grammar need it.
struct ToolSpec {
  std::string name;
  Json parameters = Json::object();  // a JSON Schema object ({} when the tool sent none)
};
using ToolList = std::vector<ToolSpec>;

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  // The segments of `text`. final = false: `text` is a prefix of the answer and only the
  // segments no continuation can change are returned. final = true: `text` is the whole
  // answer; call markup that is unterminated or malformed is returned as text.
  virtual std::vector<ToolSegment> scan(std::string_view text, bool final) const = 0;
};

// The message a chat choice carries.
struct ToolOutput {
  std::string content;  // the text outside the calls (see assemble_tool_output)
  std::vector<ToolCall> calls;
};

// The text segments joined and the calls in order (only the first when `parallel` is false).
// Without calls the content is the text unchanged; with calls its trailing whitespace is
// dropped, and its leading whitespace when a call comes before any other text. (Both rules
// only look backwards from a decided point, so a stream can apply them as it goes.)
ToolOutput assemble_tool_output(const std::vector<ToolSegment>& segments, bool parallel);

// Whole-answer parse: assemble_tool_output(parser.scan(text, true), parallel).
ToolOutput parse_tool_output(const ToolCallParser& parser, std::string_view text, bool parallel);

}  // namespace lockstep::server::tools
