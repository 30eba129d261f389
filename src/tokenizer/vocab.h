// Token string <-> id table. A flat open-addressing hash over one byte arena: loading inserts
// ~150k-260k tokens and BPE looks them up constantly, and a node-based map spent most of the
// load time in allocation and cache misses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

class Vocab {
 public:
  void reserve(size_t n);
  // Later entries for the same string replace earlier ones, as in the reference's hash map.
  void insert(std::string_view token, int32_t id);
  std::optional<int32_t> find(std::string_view token) const;
  // The string of `id`, or nullptr when no token has that id.
  std::optional<std::string_view> token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= by_id_.size() || by_id_[id] < 0) return std::nullopt;
    return text(entries_[by_id_[id]]);
  }
  size_t size() const { return entries_.size(); }
  // One past the largest id in use.
  int32_t end_id() const { return static_cast<int32_t>(by_id_.size()); }

 private:
  struct Entry {
    uint32_t offset, length;
    uint32_t hash;
    int32_t id;
  };
  static uint32_t hash_of(std::string_view s);
  std::string_view text(const Entry& e) const {
    return std::string_view(arena_).substr(e.offset, e.length);
  }
  void grow();

  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> slots_;  // entry index + 1, 0 = empty; size is a power of two
  std::vector<int32_t> by_id_;   // id -> entry index, -1 = none
};

}  // namespace lockstep
