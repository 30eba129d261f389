// The grammar of a forced tool call (tool_choice "required" or a named function): the family's
// call syntax around each tool's parameters, so that whatever the model's weights prefer, the
// answer parses into calls whose arguments satisfy the tools' JSON Schemas. Built from
// src/constraints pieces: the envelope as literals, the arguments by the JSON Schema compiler
// (Gemma 4 and Qwen3-Coder write arguments in their own notation: see call_grammar.cpp).
#pragma once

#include "constraints/grammar.h"
#include "server/tools/tool_call.h"
#include "server/tools/tool_family.h"

namespace lockstep::server::tools {

// One or more calls of any of `tools` when `several`, else exactly one. Throws lockstep::Error
// naming the tool and the schema place on a parameters schema the compiler refuses.
constraints::Grammar tool_call_grammar(ToolFamily family, const ToolList& tools, bool several);

}  // namespace lockstep::server::tools
