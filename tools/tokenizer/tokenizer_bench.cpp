// Times tokenizer load and 1 MB encode/decode on one core (run by tools/tokenizer/bench.sh).
//   usage: tokenizer_bench <tokenizer-dir> <corpus-dir>
// The 1 MB input is the corpus files concatenated and repeated, so it mixes prose, code, CJK,
// emoji and whitespace rather than timing one easy language.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <tokenizer-dir> <corpus-dir>\n", argv[0]);
    return 2;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(argv[2])) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::string corpus;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    corpus += s.str();
  }
  std::string text;
  while (text.size() < (1u << 20)) text += corpus;
  text.resize(1u << 20);
  // Cut back to a character boundary so the input is valid UTF-8.
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();

  // A second input without repeated words (random "words" over Latin, Cyrillic and CJK letters),
  // so the per-call word cache cannot help: the worst case for BPE.
  static const char* kLetters[] = {"a", "e", "i", "o", "n", "s", "t", "r", "k", "m", "\xD0\xB0",
                                   "\xD0\xBE", "\xD1\x82", "\xE7\x9A\x84", "\xE4\xB8\x80",
                                   "\xE6\x98\xAF", "1", "."};
  std::string noise;
  uint32_t seed = 12345;
  auto next = [&] { return (seed = seed * 1664525u + 1013904223u) >> 8; };
  while (noise.size() < (1u << 20)) {
    const uint32_t len = 2 + next() % 9;
    for (uint32_t k = 0; k < len; ++k) noise += kLetters[next() % 18];
    noise += next() % 10 ? " " : "\n";
  }

  double load_best = 1e9, encode_best = 1e9, decode_best = 1e9, noise_best = 1e9;
  size_t n_ids = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    const auto tok = lockstep::Tokenizer::load(argv[1]);
    load_best = std::min(load_best, seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    const auto ids = tok->encode(text, false);
    encode_best = std::min(encode_best, seconds_since(t0));
    n_ids = ids.size();
    t0 = std::chrono::steady_clock::now();
    const std::string back = tok->decode(ids);
    decode_best = std::min(decode_best, seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    (void)tok->encode(noise, false);
    noise_best = std::min(noise_best, seconds_since(t0));
  }
  std::printf("%s\n  load: %.3f s\n  encode %zu bytes: %.3f s (%.1f MB/s, %zu tokens)\n"
              "  decode: %.3f s\n  encode %zu bytes of random words: %.3f s\n",
              argv[1], load_best, text.size(), encode_best, text.size() / encode_best / 1e6,
              n_ids, decode_best, noise.size(), noise_best);
  return 0;
}
