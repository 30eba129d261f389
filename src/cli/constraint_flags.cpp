#include "cli/constraint_flags.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "decode/constraint_vocab.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {

namespace {

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

// --json-schema takes the schema itself when it looks like JSON (an object or a boolean schema),
// otherwise a file name.
std::string schema_text(const std::string& arg) {
  const size_t b = arg.find_first_not_of(" \t\r\n");
  if (b != std::string::npos &&
      (arg[b] == '{' || arg.compare(b, 4, "true") == 0 || arg.compare(b, 5, "false") == 0))
    return arg;
  std::string text;
  if (!read_file(arg, text))
    fail("--json-schema: \"", arg,
         "\" is neither a JSON object nor a readable file (expected a JSON Schema, inline or in a "
         "file)");
  return text;
}

}  // namespace

void add_constraint_flags(CLI::App& app, ConstraintFlags& f) {
  app.add_option("--json-schema", f.json_schema,
                 "Constrain the output to JSON valid under this JSON Schema (inline JSON or a file)");
  app.add_option("--grammar", f.grammar, "Constrain the output to this GBNF grammar file");
  app.add_option("--regex", f.regex, "Constrain the whole output to match this regular expression");
  app.add_flag("--json-object", f.json_object, "Constrain the output to one JSON object");
}

std::shared_ptr<const constraints::Constraint> compile_constraint_flags(
    const ConstraintFlags& f, const Tokenizer* tokenizer, const ModelConfig& config,
    std::vector<int32_t> eos_ids, bool with_end_of_turn) {
  if (!f.given()) return nullptr;
  const int n = !f.json_schema.empty() + !f.grammar.empty() + !f.regex.empty() + f.json_object;
  if (n > 1) fail("give at most one of --json-schema, --grammar, --regex and --json-object");
  std::string flag;
  constraints::ConstraintSpec spec;
  if (!f.json_schema.empty()) {
    flag = "--json-schema";
    spec = constraints::ConstraintSpec::json_schema(schema_text(f.json_schema));
  } else if (!f.grammar.empty()) {
    flag = "--grammar";
    std::string text;
    if (!read_file(f.grammar, text))
      fail("--grammar: cannot read \"", f.grammar, "\" (expected a file holding a GBNF grammar)");
    spec = constraints::ConstraintSpec::gbnf(std::move(text));
  } else if (!f.regex.empty()) {
    flag = "--regex";
    spec = constraints::ConstraintSpec::regex(f.regex);
  } else {
    flag = "--json-object";
    spec = constraints::ConstraintSpec::json_object();
  }
  if (!tokenizer)
    fail(flag, " needs the model's tokenizer.json (constraints match the text tokens spell)");
  if (with_end_of_turn)
    for (int32_t id : end_of_turn_ids(*tokenizer))
      if (std::find(eos_ids.begin(), eos_ids.end(), id) == eos_ids.end()) eos_ids.push_back(id);
  auto vocab = token_vocabulary(*tokenizer, eos_ids, config.vocab_size);
  try {
    return constraints::Constraint::compile(spec, std::move(vocab));
  } catch (const Error& e) {
    fail(flag, ": ", e.what());
  }
}

}  // namespace lockstep::cli
