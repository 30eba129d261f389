// Building tiny random checkpoints for model tests (once per process, in a temp directory).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "models/random_checkpoint.h"

namespace lockstep::test {

// Directory of a random checkpoint of preset `like` (e.g. "tiny-qwen3"), created on first use.
inline std::string tiny_checkpoint(const std::string& like, DType dtype = DType::F32) {
  static std::map<std::string, std::string> made;
  const std::string key = like + "/" + std::string(dtype_name(dtype));
  if (auto it = made.find(key); it != made.end()) return it->second;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("lockstep-test-" + std::to_string(::getpid()) + "-" + like + "-" +
                    std::string(dtype_name(dtype)));
  RandomCheckpointOptions o;
  o.like = like;
  o.out_dir = dir.string();
  o.dtype = dtype;
  o.seed = 1234;
  o.progress = false;
  make_random_checkpoint(o);
  made[key] = dir.string();
  return dir.string();
}

}  // namespace lockstep::test
