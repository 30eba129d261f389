// Tool calls written as a Python list of calls, the form Llama 3.2's lightweight models and
// Llama 4 are prompted to write (vLLM calls its parser "pythonic"):
//   [get_weather(city="Paris", days=3), ping()]
// Arguments are keyword arguments whose values are Python literals: strings in single or double
// quotes with backslash escapes, integers and floats, True / False / None (true / false / null
// too), lists, tuples and dicts with string keys. They become the call's JSON arguments object,
// compact and in the order written ({"city":"Paris","days":3}).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "server/tools/tool_call.h"

namespace lockstep::server::tools {

// The calls of `text` (the whole of it, surrounding whitespace allowed), or nullopt when it is
// not such a list, the list is empty, or a value nests deeper than 64 levels.
std::optional<std::vector<ToolCall>> parse_pythonic_calls(std::string_view text);

}  // namespace lockstep::server::tools
