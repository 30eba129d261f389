#include "tokenizer/json_reader.h"

#include <algorithm>

namespace lockstep {
namespace {

using json = tok::json;

class Reader {
 public:
  Reader(ModelTables& t, const std::string& name) : t_(t), name_(name) {}
  json root;

  bool null() { return value(json(nullptr)); }
  bool boolean(bool v) { return value(json(v)); }
  bool number_integer(json::number_integer_t v) {
    if (mode() == kVocab) return vocab_id(v, true);
    return value(json(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (mode() == kVocab) return vocab_id(static_cast<int64_t>(std::min<uint64_t>(v, INT64_MAX)), true);
    return value(json(v));
  }
  bool number_float(json::number_float_t v, const std::string&) {
    if (mode() == kVocab) return vocab_id(0, false);
    return value(json(v));
  }
  bool string(std::string& s) {
    switch (mode()) {
      case kVocab:
        return vocab_id(0, false);
      case kMerges:
        t_.merges.push_back({std::move(s), {}, true});
        return true;
      case kPair:
        pair_.push_back(std::move(s));
        return true;
      default:
        return value(json(std::move(s)));
    }
  }
  bool binary(json::binary_t&) { return value(json(nullptr)); }
  bool start_object(size_t) {
    const Mode m = mode();
    if (m == kMerges || m == kPair || m == kVocab) return bad_entry(json::object());
    if (is_model_field("vocab")) {
      t_.has_vocab = true;
      frames_.push_back({nullptr, kVocab});
      return true;
    }
    json* node = place(json::object());
    frames_.push_back({node, kTree});
    return true;
  }
  bool key(std::string& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() {
    frames_.pop_back();
    return true;
  }
  bool start_array(size_t) {
    const Mode m = mode();
    if (m == kVocab || m == kPair) return bad_entry(json::array());
    if (m == kMerges) {
      pair_.clear();
      frames_.push_back({nullptr, kPair});
      return true;
    }
    if (is_model_field("merges")) {
      t_.has_merges = true;
      frames_.push_back({nullptr, kMerges});
      return true;
    }
    json* node = place(json::array());
    frames_.push_back({node, kTree});
    return true;
  }
  bool end_array() {
    if (mode() == kPair) {
      if (pair_.size() == 2)
        t_.merges.push_back({std::move(pair_[0]), std::move(pair_[1]), false});
      else
        note("model.merges[" + std::to_string(t_.merges.size()) +
             "]: expected \"left right\" or [\"left\", \"right\"]");
      pair_.clear();
    }
    frames_.pop_back();
    return true;
  }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    fail(name_, ": not valid JSON (", e.what(), ")");
  }

 private:
  enum Mode { kTree, kVocab, kMerges, kPair };
  struct Frame {
    json* node;
    Mode mode;
  };
  ModelTables& t_;
  const std::string& name_;
  std::vector<Frame> frames_;
  std::vector<std::string> pair_;
  std::string key_;
  json* model_ = nullptr;

  Mode mode() const { return frames_.empty() ? kTree : frames_.back().mode; }

  // True when the value about to start is the top-level "model" object's field `field`.
  bool is_model_field(const char* field) const {
    return frames_.size() == 2 && frames_[1].node == model_ && model_ && key_ == field;
  }

  json* place(json&& v) {
    if (frames_.empty()) {
      root = std::move(v);
      return &root;
    }
    json* parent = frames_.back().node;
    if (parent->is_array()) {
      parent->push_back(std::move(v));
      return &parent->back();
    }
    json& slot = (*parent)[key_];
    slot = std::move(v);
    if (frames_.size() == 1 && key_ == "model" && slot.is_object()) model_ = &slot;
    return &slot;
  }
  bool value(json&& v) {
    const Mode m = mode();
    if (m == kVocab) return vocab_id(0, false);
    if (m == kMerges || m == kPair) return bad_entry(json());
    place(std::move(v));
    return true;
  }
  bool vocab_id(int64_t v, bool integer) {
    if (!integer || v < 0 || v > INT32_MAX)
      note("model.vocab[\"" + key_ + "\"]: expected a non-negative integer id");
    t_.vocab.emplace_back(std::move(key_), v);
    return true;
  }
  // Records a malformed vocab/merges entry. A container in such a place is parsed into a
  // throwaway tree so that its contents do not disturb the tables.
  bool bad_entry(json&& container) {
    if (mode() == kVocab)
      note("model.vocab[\"" + key_ + "\"]: expected a non-negative integer id");
    else
      note("model.merges[" + std::to_string(t_.merges.size()) +
           "]: expected \"left right\" or [\"left\", \"right\"]");
    if (!container.is_null()) {
      scratch_ = std::move(container);
      frames_.push_back({&scratch_, kTree});
    }
    return true;
  }
  json scratch_;
  void note(std::string msg) {
    if (t_.error.empty()) t_.error = name_ + ": " + msg;
  }
};

}  // namespace

tok::json read_tokenizer_json(std::string_view text, const std::string& name, ModelTables& t) {
  Reader r(t, name);
  json::sax_parse(text.begin(), text.end(), &r);
  return std::move(r.root);
}

}  // namespace lockstep
