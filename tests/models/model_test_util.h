// Building tiny random checkpoints for model tests (once per process, in a temp directory).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include <random>
#include <unistd.h>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "models/config.h"
#include "models/model.h"
#include "models/random_checkpoint.h"

namespace lockstep::test {

// Directories this test process wrote under the temporary directory, removed when it exits (each
// test process makes its own: their names carry the pid).
struct TempDirs {
  std::vector<std::filesystem::path> dirs;
  ~TempDirs() {
    std::error_code ec;
    for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
  }
};
inline void remove_at_exit(const std::filesystem::path& dir) {
  static TempDirs dirs;
  dirs.dirs.push_back(dir);
}

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
  remove_at_exit(dir);
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


// A model with sliding windows (of 8) read in every way a request can be: one forward, token by
// token, in chunks, on other thread counts and block sizes, batched beside sequences of other
// lengths, from a fork past the window (the prefix cache) and after truncation past it: the
// same bits each time.
inline void expect_invariant_across_the_window(const std::string& dir) {
  ThreadPool one(1), two(2);
  ModelOptions o1;
  o1.pool = &one;
  auto m = load_model(dir, o1);
  ASSERT_EQ(m->config().sliding_window, 8);  // the prompts below are several windows long
  const int V = static_cast<int>(m->config().vocab_size);
  const auto ids = random_ids(37, V, 5);
  const auto whole = logits_in_pieces(*m, ids, {37});
  ASSERT_EQ(whole.size(), ids.size() * V);
  EXPECT_EQ(whole, logits_in_pieces(*m, ids, {1}));
  EXPECT_EQ(whole, logits_in_pieces(*m, ids, {5, 2, 11}));
  EXPECT_EQ(whole, logits_in_pieces(*m, ids, {8}));

  ModelOptions o2;
  o2.pool = &two;
  o2.kv_block_tokens = 3;
  auto m2 = load_model(dir, o2);
  EXPECT_EQ(whole, logits_in_pieces(*m2, ids, {7}));

  // Batched beside sequences of other lengths (one of them already past the window).
  auto s0 = m2->new_sequence(), s1 = m2->new_sequence(), s2 = m2->new_sequence();
  const auto other1 = random_ids(9, V, 6), other2 = random_ids(20, V, 7);
  ForwardItem pre{s2.get(), {other2.data(), 13}, ForwardItem::Logits::None};
  m2->forward({&pre, 1});
  ForwardItem items[3] = {{s1.get(), other1, ForwardItem::Logits::Last},
                          {s0.get(), ids, ForwardItem::Logits::All},
                          {s2.get(), {other2.data() + 13, 7}, ForwardItem::Logits::All}};
  auto r = m2->forward(items);
  ASSERT_EQ(r.rows, 1 + 37 + 7);
  EXPECT_EQ(0, std::memcmp(&r.logits[r.first_row[1] * V], whole.data(), whole.size() * 4));

  // The prefix cache: a fork at 20 (past the window) continued with the rest.
  auto src = m->new_sequence();
  ForwardItem a{src.get(), {ids.data(), 30}, ForwardItem::Logits::None};
  m->forward({&a, 1});
  auto forked = m->fork(*src, 20);
  ForwardItem c{forked.get(), {ids.data() + 20, 17}, ForwardItem::Logits::All};
  auto rc = m->forward({&c, 1});
  EXPECT_EQ(0, std::memcmp(rc.logits.data(), &whole[20 * V], 17 * V * 4));

  // Truncate back past the window and re-feed.
  m->truncate(*src, 12);
  ForwardItem d{src.get(), {ids.data() + 12, 25}, ForwardItem::Logits::All};
  auto rd = m->forward({&d, 1});
  EXPECT_EQ(0, std::memcmp(rd.logits.data(), &whole[12 * V], 25 * V * 4));
}

// A config.json text that must be refused with an error naming `field`.
inline void expect_config_refused(const std::string& text, const std::string& field) {
  try {
    parse_model_config(text, "config.json");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    return;
  }
  ADD_FAILURE() << "accepted: " << text;
}

}  // namespace lockstep::test
