#include "tokenizer/post_processor.h"

namespace lockstep {

struct PostProcessor::Step {
  // Ids before and after the sequence (TemplateProcessing "single", Bert/Roberta cls and sep).
  std::vector<int32_t> before, after;
};

PostProcessor::~PostProcessor() = default;

std::unique_ptr<PostProcessor> PostProcessor::load(const tok::json& j, const std::string& where) {
  auto p = std::unique_ptr<PostProcessor>(new PostProcessor);
  if (!j.is_null()) p->add(j, where);
  return p;
}

namespace {

int32_t pair_id(const tok::json& j, const char* key, const std::string& where) {
  const tok::json& v = tok::required(j, key, where);
  if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer() || v[1].get<int64_t>() < 0)
    fail(tok::sub(where, key), ": expected [\"token\", id]");
  return static_cast<int32_t>(v[1].get<int64_t>());
}

}  // namespace

void PostProcessor::add(const tok::json& j, const std::string& where) {
  const std::string type = tok::string_field(j, "type", where);
  auto s = std::make_unique<Step>();
  if (type == "Sequence") {
    const auto& list = tok::array_field(j, "processors", where);
    for (size_t i = 0; i < list.size(); ++i)
      add(list[i], where + ".processors[" + std::to_string(i) + "]");
    return;
  } else if (type == "ByteLevel") {
    return;  // offsets only
  } else if (type == "TemplateProcessing") {
    const auto& single = tok::array_field(j, "single", where);
    const tok::json& specials = tok::required(j, "special_tokens", where);
    bool seen_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const std::string w = where + ".single[" + std::to_string(i) + "]";
      if (tok::optional(single[i], "Sequence")) {
        seen_sequence = true;
        continue;
      }
      const tok::json& sp = tok::required(single[i], "SpecialToken", w);
      const std::string name = tok::string_field(sp, "id", tok::sub(w, "SpecialToken"));
      const std::string sw = tok::sub(where, "special_tokens") + "[\"" + name + "\"]";
      const tok::json* entry = tok::optional(specials, name.c_str());
      if (!entry) fail(sw, ": missing (used by ", w, ")");
      for (const auto& id : tok::array_field(*entry, "ids", sw)) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0)
          fail(sw, ".ids: expected non-negative integers");
        (seen_sequence ? s->after : s->before).push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
    }
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    s->before.push_back(pair_id(j, "cls", where));
    s->after.push_back(pair_id(j, "sep", where));
  } else {
    fail(tok::sub(where, "type"), ": unsupported post-processor \"", type,
         "\" (supported: Sequence, ByteLevel, TemplateProcessing, BertProcessing, "
         "RobertaProcessing)");
  }
  steps_.push_back(std::move(s));
}

std::vector<int32_t> PostProcessor::apply(std::vector<int32_t> ids) const {
  for (const auto& s : steps_) {
    std::vector<int32_t> out = s->before;
    out.insert(out.end(), ids.begin(), ids.end());
    out.insert(out.end(), s->after.begin(), s->after.end());
    ids = std::move(out);
  }
  return ids;
}

}  // namespace lockstep
