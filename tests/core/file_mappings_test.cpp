// The registry of file mappings (core/file_mappings.h): only noted ranges count, whole ranges
// only, and a forgotten mapping no longer does.
#include "core/file_mappings.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace lockstep {
namespace {

TEST(FileMappings, OnlyNotedRangesCount) {
  std::vector<uint8_t> a(8192);
  EXPECT_FALSE(in_file_mapping(a.data(), 16));
  note_file_mapping(a.data(), 4096);
  EXPECT_TRUE(in_file_mapping(a.data(), 4096));
  EXPECT_TRUE(in_file_mapping(a.data() + 100, 100));
  EXPECT_FALSE(in_file_mapping(a.data() + 4000, 200)) << "runs past the mapping's end";
  EXPECT_FALSE(in_file_mapping(a.data() + 4096, 1));
  forget_file_mapping(a.data());
  EXPECT_FALSE(in_file_mapping(a.data(), 16));
}

}  // namespace
}  // namespace lockstep
