#include "decode/speculative/lookup_drafter.h"

#include <algorithm>

namespace lockstep {

std::vector<int32_t> LookupDrafter::propose(std::span<const int32_t> h, int64_t, int k) {
  const int64_t n = static_cast<int64_t>(h.size());
  for (int64_t g = std::min<int64_t>(max_ngram_, n - 1); g >= 1; --g) {
    const auto tail = h.subspan(n - g);
    // Latest match first: recent context predicts best.
    for (int64_t s = n - g - 1; s >= 0; --s) {
      if (!std::equal(tail.begin(), tail.end(), h.begin() + s)) continue;
      std::vector<int32_t> out;
      for (int64_t i = s + g; i < n && static_cast<int>(out.size()) < k; ++i) out.push_back(h[i]);
      if (!out.empty()) return out;
    }
  }
  return {};
}

}  // namespace lockstep
