// Unit tests of the interpreter: each expected string was checked against Python Jinja2 3.1.6 in
// an ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True), as transformers uses.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "core/error.h"

namespace lockstep {
namespace {

std::string render(const std::string& src, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  return ChatTemplate(src).render(nlohmann::ordered_json::array(), vars);
}

TEST(ChatRender, Literals) {
  EXPECT_EQ(render("{{ [1,'a',\"it's\", none, true, 1.5, {'k': [2]}] }}"),
            "[1, 'a', \"it's\", None, True, 1.5, {'k': [2]}]");
  EXPECT_EQ(render("{{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 10/4 }} {{ 7//2 }} {{ -7 % 3 }} {{ 2**10 }}"),
            "1e+16 1000000000000000.0 0.0001 1e-05 2.5 3 2 1024");
}

}  // namespace
}  // namespace lockstep
