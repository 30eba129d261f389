// The read-only file mappings the process holds (io/safetensors.cpp maps checkpoint files), so a
// backend that keeps its own copy of a weight can hand the mapped pages back (MADV_DONTNEED:
// the page cache keeps them; a later read maps them again) knowing they are file pages and not
// anonymous memory, which the same advice would zero.
#pragma once

#include <cstddef>

namespace lockstep {

void note_file_mapping(const void* p, size_t bytes);
void forget_file_mapping(const void* p);
// Whether [p, p + bytes) lies inside one noted mapping.
bool in_file_mapping(const void* p, size_t bytes);
// Unmaps the pages wholly inside [p, p + bytes) (MADV_DONTNEED) if the range lies in a noted file
// mapping; other memory is left as it is (the same advice would zero anonymous pages).
void release_file_pages(const void* p, size_t bytes);

}  // namespace lockstep
