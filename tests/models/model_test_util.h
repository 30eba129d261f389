// Building tiny random checkpoints for model tests (once per process, in a temp directory).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include <random>
#include <unistd.h>
#include <vector>

#include "models/model.h"
#include "models/random_checkpoint.h"

namespace lockstep::test {

// Directory of a random checkpoint of preset `like` (e.g. "tiny-qwen3"), created on first use;
// another seed gives other weights (a draft beside its target).
inline std::string tiny_checkpoint(const std::string& like, DType dtype = DType::F32,
                                   uint64_t seed = 1234) {
  static std::map<std::string, std::string> made;
  const std::string key =
      like + "/" + std::string(dtype_name(dtype)) + "/" + std::to_string(seed);
  if (auto it = made.find(key); it != made.end()) return it->second;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("lockstep-test-" + std::to_string(::getpid()) + "-" + like + "-" +
                    std::string(dtype_name(dtype)) + "-" + std::to_string(seed));
  RandomCheckpointOptions o;
  o.like = like;
  o.out_dir = dir.string();
  o.dtype = dtype;
  o.seed = seed;
  o.progress = false;
  make_random_checkpoint(o);
  made[key] = dir.string();
  return dir.string();
}

// n token ids in [0, vocab), deterministic per seed.
inline std::vector<int32_t> random_ids(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = static_cast<int32_t>(rng() % vocab);
  return v;
}

// All-position logits of `ids` fed to a new sequence in pieces of the given sizes (cycled).
inline std::vector<float> logits_in_pieces(Model& m, const std::vector<int32_t>& ids,
                                           const std::vector<int>& pieces) {
  auto seq = m.new_sequence();
  std::vector<float> all;
  size_t at = 0, k = 0;
  while (at < ids.size()) {
    const size_t n = std::min<size_t>(pieces[k++ % pieces.size()], ids.size() - at);
    ForwardItem it{seq.get(), {ids.data() + at, n}, ForwardItem::Logits::All};
    auto r = m.forward({&it, 1});
    all.insert(all.end(), r.logits.begin(), r.logits.end());
    at += n;
  }
  return all;
}

}  // namespace lockstep::test
