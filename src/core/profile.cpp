#include "core/profile.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace lockstep::profile {
namespace {
constexpr int kOps = static_cast<int>(Op::kCount);
const char* const kNames[kOps] = {"linear",        "attention",      "rms_norm",
                                  "rope",          "silu_mul",       "embedding",
                                  "deltanet_conv", "deltanet_step",  "other"};
struct Table {
  std::atomic<int64_t> ns[kOps] = {}, bytes[kOps] = {}, calls[kOps] = {};
  ~Table() {
    if (enabled()) report();
  }
};
Table& table() {
  static Table t;
  return t;
}
}  // namespace

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("LOCKSTEP_PROFILE");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

void add(Op op, int64_t ns, int64_t bytes) {
  Table& t = table();
  const int i = static_cast<int>(op);
  t.ns[i] += ns;
  t.bytes[i] += bytes;
  t.calls[i] += 1;
}

void report() {
  Table& t = table();
  int64_t total = 0;
  for (int i = 0; i < kOps; ++i) total += t.ns[i];
  if (total == 0) return;
  std::fprintf(stderr, "lockstep profile (wall time in kernel entry points)\n");
  std::fprintf(stderr, "  %-14s %10s %8s %10s %7s %9s\n", "op", "calls", "ms", "us/call", "share",
               "GB/s");
  for (int i = 0; i < kOps; ++i) {
    const int64_t ns = t.ns[i], calls = t.calls[i], bytes = t.bytes[i];
    if (calls == 0) continue;
    std::fprintf(stderr, "  %-14s %10lld %8.1f %10.2f %6.1f%% %9s\n", kNames[i],
                 static_cast<long long>(calls), ns / 1e6, ns / 1e3 / calls, 100.0 * ns / total,
                 bytes ? std::to_string(bytes / static_cast<double>(ns)).substr(0, 6).c_str() : "");
    t.ns[i] = 0;
    t.bytes[i] = 0;
    t.calls[i] = 0;
  }
}

}  // namespace lockstep::profile
