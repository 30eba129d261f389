// Pieces the tool-call parsers share: marker scanning that holds back a tail which may still
// become a marker, the extent of a JSON value inside longer text, and the check that turns a
// parsed {"name", "arguments"} object into a ToolCall.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "server/tools/tool_call.h"

namespace lockstep::server::tools {

// The length of the longest proper prefix of `marker` that `text` ends with (0 when none): text
// that must not be shown yet, since the next delta may complete the marker.
size_t partial_marker_tail(std::string_view text, std::string_view marker);

// The end (one past the closing bracket) of the JSON object or array starting at text[from],
// or npos when text ends first or text[from] opens neither. Strings and escapes are skipped, so
// brackets inside strings do not count.
size_t json_container_end(std::string_view text, size_t from);

// The JSON value of `text` (surrounding whitespace allowed), or nullopt when it is not JSON or
// nests deeper than 64 levels.
std::optional<Json> parse_json(std::string_view text);

// A call from a parsed object holding the name under "name" and the arguments under `args_key`
// (an object, or a string holding a JSON object; absent means {}). nullopt for anything else.
std::optional<ToolCall> call_from_object(const Json& j, const char* args_key = "arguments");

// Calls written as BEGIN body END blocks between text (Hermes, Qwen3-Coder, Gemma 4). `body`
// parses one block's text into its calls, nullopt when malformed: the block is then text.
using BlockBodyParser = std::function<std::optional<std::vector<ToolCall>>(std::string_view body)>;
std::vector<ToolSegment> scan_blocks(std::string_view text, bool final, std::string_view begin,
                                     std::string_view end, const BlockBodyParser& body);

}  // namespace lockstep::server::tools
