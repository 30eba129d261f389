#include "core/file_mappings.h"

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

namespace lockstep {
namespace {

struct Mappings {
  std::mutex mu;
  std::map<uintptr_t, uintptr_t> end_of;  // start -> end
};

Mappings& mappings() {
  static Mappings m;
  return m;
}

}  // namespace

void note_file_mapping(const void* p, size_t bytes) {
  Mappings& m = mappings();
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(m.mu);
  m.end_of[at] = at + bytes;
}

void forget_file_mapping(const void* p) {
  Mappings& m = mappings();
  std::lock_guard<std::mutex> lock(m.mu);
  m.end_of.erase(reinterpret_cast<uintptr_t>(p));
}

bool in_file_mapping(const void* p, size_t bytes) {
  Mappings& m = mappings();
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.end_of.upper_bound(at);  // the first mapping starting after p
  if (it == m.end_of.begin()) return false;
  it = std::prev(it);
  return at + bytes <= it->second;
}

}  // namespace lockstep
