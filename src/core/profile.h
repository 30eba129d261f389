// Per-op wall-clock profile, for finding where a forward's time goes. Off unless the environment
// has LOCKSTEP_PROFILE=1; then each kernel entry point adds its wall time (as seen by the calling
// thread, parallel parts included) and, for linear layers, the weight bytes it read, and a table
// per op kind is printed to stderr at exit. When off, a Scope costs one predictable branch.
#pragma once

#include <chrono>
#include <cstdint>

namespace lockstep::profile {

enum class Op : int {
  Linear, Attention, RmsNorm, Rope, SiluMul, Embedding, DeltaNetConv, DeltaNetStep, Other, kCount
};

bool enabled();
void add(Op op, int64_t ns, int64_t bytes);
// Prints the table now (also done at exit) and clears it.
void report();

class Scope {
 public:
  explicit Scope(Op op, int64_t bytes = 0) : op_(op), bytes_(bytes), on_(enabled()) {
    if (on_) t0_ = std::chrono::steady_clock::now();
  }
  ~Scope() {
    if (on_)
      add(op_, std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - t0_).count(), bytes_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Op op_;
  int64_t bytes_;
  bool on_;
  std::chrono::steady_clock::time_point t0_{};
};

}  // namespace lockstep::profile
