// Reading tokenizer.json, tokenizer_config.json, chat_template.jinja and generation_config.json.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer_impl.h"

namespace lockstep {
namespace {

tok::json parse(std::string_view text, const std::string& name) {
  try {
    return tok::json::parse(text.begin(), text.end());
  } catch (const tok::json::exception& e) {
    fail(name, ": not valid JSON (", e.what(), ")");
  }
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail(p.string(), ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// tokenizer_config.json writes special tokens either as a string or as an AddedToken object.
std::optional<std::string> token_text(const tok::json& cfg, const char* key,
                                      const std::string& name) {
  const tok::json* v = tok::optional(cfg, key);
  if (!v) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_object()) return tok::string_field(*v, "content", tok::sub(name, key));
  fail(tok::sub(name, key), ": expected a string or {\"content\": ...}");
}

}  // namespace

void Tokenizer::Impl::load_tokenizer_json(std::string_view text, const std::string& name) {
  ModelTables tables;
  const tok::json j = read_tokenizer_json(text, name, tables);
  if (!j.is_object()) fail(name, ": expected a JSON object at the top level");
  const std::string root = name + ": ";
  model = std::make_unique<BpeModel>(tok::required(j, "model", name), tables, root + "model");
  const tok::json null;
  const tok::json* n = tok::optional(j, "normalizer");
  has_normalizer = n != nullptr;
  normalizer = Normalizer::load(n ? *n : null, root + "normalizer");
  const tok::json* p = tok::optional(j, "pre_tokenizer");
  pre_tokenizer = PreTokenizer::load(p ? *p : null, root + "pre_tokenizer");
  const tok::json* pp = tok::optional(j, "post_processor");
  post_processor = PostProcessor::load(pp ? *pp : null, root + "post_processor");
  const tok::json* d = tok::optional(j, "decoder");
  decoder = Decoder::load(d ? *d : null, root + "decoder");

  const Vocab& vocab = model->vocab();
  vocab_end = vocab.end_id();
  // Ids of added tokens come from the vocabulary, else are handed out after it; the ids written
  // in the file are not used (the reference only warns when they differ).
  auto next_id = static_cast<int32_t>(vocab.size());
  if (const tok::json* list = tok::optional(j, "added_tokens")) {
    if (!list->is_array()) fail(root + "added_tokens: expected an array");
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string w = root + "added_tokens[" + std::to_string(i) + "]";
      const tok::json& e = (*list)[i];
      AddedToken t;
      t.content = tok::string_field(e, "content", w);
      if (t.content.empty()) continue;
      t.special = tok::bool_or(e, "special", w, false);
      t.single_word = tok::bool_or(e, "single_word", w, false);
      t.lstrip = tok::bool_or(e, "lstrip", w, false);
      t.rstrip = tok::bool_or(e, "rstrip", w, false);
      t.normalized = tok::bool_or(e, "normalized", w, !t.special);
      if (auto it = added_by_content.find(t.content); it != added_by_content.end()) {
        t.id = added[it->second].id;
        added[it->second] = t;
        continue;
      }
      if (auto id = vocab.find(t.content))
        t.id = *id;
      else
        t.id = next_id++;
      added_by_content[t.content] = added.size();
      added_by_id[t.id] = added.size();
      added.push_back(t);
      vocab_end = std::max(vocab_end, t.id + 1);
    }
  }
  for (size_t i = 0; i < added.size(); ++i) {
    const AddedToken& t = added[i];
    if (!t.normalized) {
      raw_matcher.add(t.content, i);
      continue;
    }
    std::string form = t.content;
    if (has_normalizer) normalizer->apply(form);
    if (form != t.content) decode_form[t.id] = form;
    normalized_matcher.add(form, i);
  }
}

void Tokenizer::Impl::load_config_json(std::string_view text, const std::string& name) {
  const tok::json cfg = parse(text, name);
  if (!cfg.is_object()) fail(name, ": expected a JSON object at the top level");
  if (const tok::json* t = tok::optional(cfg, "chat_template")) {
    if (t->is_string()) {
      chat_template = t->get<std::string>();
    } else if (t->is_array()) {
      // Named templates: [{"name": "default", "template": "..."}, ...]; take "default".
      for (const auto& e : *t)
        if (tok::string_or(e, "name", name + ".chat_template[]", "") == "default")
          chat_template = tok::string_field(e, "template", name + ".chat_template[]");
    } else {
      fail(name, ".chat_template: expected a string or a list of named templates");
    }
  }
  auto lookup = [&](const std::string& s) -> std::optional<int32_t> {
    if (auto it = added_by_content.find(s); it != added_by_content.end()) return added[it->second].id;
    return model->vocab().find(s);
  };
  if (auto b = token_text(cfg, "bos_token", name)) {
    bos = lookup(*b);
    if (!bos) fail(name, ".bos_token: \"", *b, "\" is not a token of tokenizer.json");
  }
  if (auto e = token_text(cfg, "eos_token", name)) {
    const auto id = lookup(*e);
    if (!id) fail(name, ".eos_token: \"", *e, "\" is not a token of tokenizer.json");
    eos.push_back(*id);
  }
}

void Tokenizer::Impl::add_generation_eos(std::string_view text, const std::string& name) {
  const tok::json g = parse(text, name);
  const tok::json* e = tok::optional(g, "eos_token_id");
  if (!e) return;
  auto add = [&](const tok::json& v) {
    if (!v.is_number_integer()) fail(name, ".eos_token_id: expected an integer or a list");
    const auto id = static_cast<int32_t>(v.get<int64_t>());
    if (std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  };
  if (e->is_array())
    for (const auto& v : *e) add(v);
  else
    add(*e);
}

bool has_tokenizer(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(std::filesystem::path(dir) / "tokenizer.json", ec);
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path base(dir);
  if (!has_tokenizer(dir))
    fail(dir, ": no tokenizer.json (expected a model directory or a tokenizer directory)");
  const std::string cfg_path = (base / "tokenizer_config.json").string();
  const std::string cfg = fs::exists(base / "tokenizer_config.json") ? read_file(cfg_path) : "";
  auto t = from_json(read_file(base / "tokenizer.json"), cfg, (base / "tokenizer.json").string());
  if (fs::exists(base / "chat_template.jinja"))
    t->impl_->chat_template = read_file(base / "chat_template.jinja");
  if (fs::exists(base / "generation_config.json"))
    t->impl_->add_generation_eos(read_file(base / "generation_config.json"),
                                 (base / "generation_config.json").string());
  return t;
}

std::unique_ptr<Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json,
                                                std::string_view config_json,
                                                const std::string& name) {
  auto t = std::unique_ptr<Tokenizer>(new Tokenizer);
  t->impl_->load_tokenizer_json(tokenizer_json, name);
  if (!config_json.empty()) {
    const auto slash = name.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : name.substr(0, slash + 1);
    t->impl_->load_config_json(config_json, dir + "tokenizer_config.json");
  }
  return t;
}

}  // namespace lockstep
