#include "core/file_mappings.h"

#include <sys/mman.h>
#include <unistd.h>

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

void release_file_pages(const void* p, size_t bytes) {
  if (bytes == 0 || !in_file_mapping(p, bytes)) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace lockstep
