// `lockstep make-random --like PRESET -o DIR`: a checkpoint with a real model's shapes and random
// weights, for benchmarks at real sizes and for tests, without downloading anything.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "core/error.h"
#include "models/random_checkpoint.h"

namespace lockstep::cli {
namespace {

struct MakeRandomArgs {
  std::string like, out, dtype = "bf16";
  uint64_t seed = 0;
  int64_t layers = 0;
  int threads = 0;
};

DType parse_dtype_flag(const std::string& s) {
  if (s == "bf16") return DType::BF16;
  if (s == "f16") return DType::F16;
  if (s == "f32") return DType::F32;
  fail("--dtype: expected bf16, f16 or f32, found \"", s, "\"");
}

int run(const MakeRandomArgs& a) {
  RandomCheckpointOptions o;
  o.like = a.like;
  o.out_dir = a.out;
  o.dtype = parse_dtype_flag(a.dtype);
  o.seed = a.seed;
  o.layers = a.layers;
  o.threads = a.threads;
  RandomCheckpointSummary s = make_random_checkpoint(o);
  std::fprintf(stderr, "make-random: wrote %s (%s, %zu tensors, %.2f M parameters, %.1f MB %s)\n",
               a.out.c_str(), a.like.c_str(), s.tensors, static_cast<double>(s.parameters) / 1e6,
               static_cast<double>(s.bytes) / 1e6, a.dtype.c_str());
  return 0;
}

const Command kMakeRandom(
    "make-random", "Write a checkpoint with a real architecture's shapes and random weights",
    [](CLI::App& sub) -> std::function<int()> {
      auto a = std::make_shared<MakeRandomArgs>();
      std::string presets;
      for (const auto& p : random_checkpoint_presets()) presets += (presets.empty() ? "" : "|") + p;
      sub.add_option("--like", a->like, "Architecture to imitate: " + presets)->required();
      sub.add_option("-o,--output", a->out, "Output directory (created if needed)")->required();
      sub.add_option("--dtype", a->dtype, "Weight dtype: bf16 (default), f16 or f32");
      sub.add_option("--seed", a->seed, "Random seed (same seed, same bytes)");
      sub.add_option("--layers", a->layers,
                     "Keep only the first N decoder layers (a large model's shapes on a small "
                     "machine; default: all)")
          ->check(CLI::PositiveNumber);
      sub.add_option("--threads", a->threads, "Generator threads (default: all cores)");
      return [a] { return run(*a); };
    });

}  // namespace
}  // namespace lockstep::cli
