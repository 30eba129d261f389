// Token string <-> id tables with string_view lookups (no temporary std::string per query).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lockstep {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Vocab {
 public:
  void reserve(size_t n) { to_id_.reserve(n); }
  // Later entries for the same string replace earlier ones, as in the reference's hash map.
  void insert(std::string token, int32_t id);
  std::optional<int32_t> find(std::string_view token) const {
    auto it = to_id_.find(token);
    if (it == to_id_.end()) return std::nullopt;
    return it->second;
  }
  const std::string* token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= to_token_.size() || !present_[id]) return nullptr;
    return &to_token_[id];
  }
  size_t size() const { return to_id_.size(); }
  // One past the largest id in use.
  int32_t end_id() const { return static_cast<int32_t>(to_token_.size()); }

 private:
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> to_id_;
  std::vector<std::string> to_token_;
  std::vector<bool> present_;
};

}  // namespace lockstep
