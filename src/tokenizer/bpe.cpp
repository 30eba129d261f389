#include "tokenizer/bpe.h"

#include <cstdio>
#include <queue>

#include "core/utf8.h"

namespace lockstep {

BpeModel::BpeModel(const tok::json& m, ModelTables& tables, const std::string& where) {
  const std::string type = tok::string_or(m, "type", where, "BPE");
  if (type != "BPE")
    fail(tok::sub(where, "type"), ": unsupported model \"", type, "\" (only BPE is supported)");
  if (const tok::json* d = tok::optional(m, "dropout")) {
    if (!d->is_number()) fail(tok::sub(where, "dropout"), ": expected a number or null");
    // Dropout makes encoding random; the engine's promise needs a deterministic tokenizer.
    if (d->get<double>() != 0.0) fail(tok::sub(where, "dropout"), ": BPE dropout is not supported");
  }
  if (const tok::json* u = tok::optional(m, "unk_token")) {
    if (!u->is_string()) fail(tok::sub(where, "unk_token"), ": expected a string or null");
    unk_token_ = u->get<std::string>();
  }
  prefix_ = tok::string_or(m, "continuing_subword_prefix", where, "");
  suffix_ = tok::string_or(m, "end_of_word_suffix", where, "");
  fuse_unk_ = tok::bool_or(m, "fuse_unk", where, false);
  byte_fallback_ = tok::bool_or(m, "byte_fallback", where, false);
  ignore_merges_ = tok::bool_or(m, "ignore_merges", where, false);

  if (!tables.error.empty()) fail(tables.error);
  if (!tables.has_vocab) {
    tok::required(m, "vocab", where);
    fail(tok::sub(where, "vocab"), ": expected an object {token: id}");
  }
  // Ids index flat tables, so a huge id would allocate gigabytes; real vocabularies stay far
  // below 2^24 (Gemma-3: 262k).
  constexpr int64_t kMaxId = int64_t{1} << 24;
  for (const auto& [token, id] : tables.vocab)
    if (id >= kMaxId)
      fail(tok::sub(where, "vocab"), "[\"", token, "\"]: id ", id, " is too large (limit ", kMaxId,
           ")");
  vocab_.reserve(tables.vocab.size());
  for (auto& [token, id] : tables.vocab) vocab_.insert(token, static_cast<int32_t>(id));
  tables.vocab = {};

  // The reference only notices a missing unk token when it first needs it, mid-encode; a file
  // like that is broken, so say so at load time.
  if (unk_token_) {
    const auto unk = vocab_.find(*unk_token_);
    if (!unk) fail(tok::sub(where, "unk_token"), ": \"", *unk_token_, "\" is not in model.vocab");
    unk_id_ = *unk;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_ids_[b] = vocab_.find(name).value_or(-1);
  }

  if (!tables.has_merges) {
    if (tok::optional(m, "merges")) fail(tok::sub(where, "merges"), ": expected an array");
    return;
  }
  merges_.reserve(tables.merges.size());
  std::string joined;
  uint32_t rank = 0;
  for (size_t i = 0; i < tables.merges.size(); ++i) {
    const ModelTables::Merge& e = tables.merges[i];
    const std::string w = tok::sub(where, "merges[" + std::to_string(i) + "]");
    std::string_view a, b;
    if (e.legacy) {
      const std::string& line = e.first;
      if (line.rfind("#version", 0) == 0) continue;  // header line of merges.txt files
      const size_t sp = line.find(' ');
      if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
        fail(w, ": expected \"left right\" (two tokens separated by one space)");
      a = std::string_view(line).substr(0, sp);
      b = std::string_view(line).substr(sp + 1);
    } else {
      a = e.first;
      b = e.second;
    }
    const auto ia = vocab_.find(a), ib = vocab_.find(b);
    if (!ia) fail(w, ": token \"", a, "\" is not in model.vocab");
    if (!ib) fail(w, ": token \"", b, "\" is not in model.vocab");
    if (b.size() < prefix_.size()) fail(w, ": token \"", b, "\" is shorter than the prefix");
    joined.assign(a);
    joined.append(b.substr(prefix_.size()));
    const auto inew = vocab_.find(joined);
    if (!inew) fail(w, ": merged token \"", joined, "\" is not in model.vocab");
    // A repeated pair keeps its last rank, like the reference's map built in order.
    merges_.insert_or_assign(pair_key(*ia, *ib), Merge{rank++, *inew});
  }
  tables.merges = {};
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = vocab_.find(word)) {
      out.push_back(*id);
      return;
    }
  }
  // Initial symbols: one per character (with prefix/suffix decorations), else its bytes as
  // <0xNN> tokens, else the unknown token (consecutive unknowns fused when fuse_unk).
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  int32_t pending_unk = -1;  // -1: none
  std::string decorated;
  for (size_t i = 0; i < word.size();) {
    const size_t start = i;
    const size_t n = utf8::char_len(word, i);
    i += n ? n : 1;
    std::string_view ch = word.substr(start, i - start);
    if ((start > 0 && !prefix_.empty()) || (i == word.size() && !suffix_.empty())) {
      decorated.clear();
      if (start > 0) decorated += prefix_;
      decorated += ch;
      if (i == word.size()) decorated += suffix_;
      ch = decorated;
    }
    if (auto id = vocab_.find(ch)) {
      if (pending_unk >= 0) ids.push_back(pending_unk);
      pending_unk = -1;
      ids.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char c : ch) all = all && byte_ids_[c] >= 0;
      if (all) {
        // The reference leaves a pending unknown in place here, to be emitted later.
        for (unsigned char c : ch) ids.push_back(byte_ids_[c]);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (pending_unk >= 0 && !fuse_unk_) ids.push_back(pending_unk);
      if (pending_unk < 0 || !fuse_unk_) pending_unk = unk_id_;
    }
  }
  if (pending_unk >= 0) ids.push_back(pending_unk);
  merge_all(ids);
  out.insert(out.end(), ids.begin(), ids.end());
}

void BpeModel::merge_all(std::vector<int32_t>& ids) const {
  if (ids.size() < 2 || merges_.empty()) return;
  // A doubly linked list over the symbols and a heap of candidate merges, mirroring the
  // reference's Word::merge_all including how it discards stale heap entries, so that ties and
  // overlapping pairs resolve the same way.
  struct Cand {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
    bool operator<(const Cand& o) const {  // std::priority_queue pops the largest
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const size_t n = ids.size();
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  std::vector<Cand> storage;
  storage.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
    if (i + 1 < n)
      if (const Merge* m = find_merge(ids[i], ids[i + 1]))
        storage.push_back({m->rank, static_cast<uint32_t>(i), m->new_id});
  }
  std::priority_queue<Cand> queue(std::less<Cand>(), std::move(storage));
  while (!queue.empty()) {
    const Cand top = queue.top();
    queue.pop();
    const uint32_t p = top.pos;
    if (!alive[p] || next[p] < 0) continue;
    const int32_t r = next[p];
    const Merge* m = find_merge(ids[p], ids[r]);
    if (!m || m->new_id != top.new_id) continue;  // stale entry
    ids[p] = top.new_id;
    alive[r] = false;
    next[p] = next[r];
    if (next[r] >= 0) prev[next[r]] = static_cast<int32_t>(p);
    if (prev[p] >= 0)
      if (const Merge* pm = find_merge(ids[prev[p]], ids[p]))
        queue.push({pm->rank, static_cast<uint32_t>(prev[p]), pm->new_id});
    if (next[p] >= 0)
      if (const Merge* nm = find_merge(ids[p], ids[next[p]])) queue.push({nm->rank, p, nm->new_id});
  }
  size_t w = 0;
  for (size_t i = 0; i < n; ++i)
    if (alive[i]) ids[w++] = ids[i];
  ids.resize(w);
}

}  // namespace lockstep
