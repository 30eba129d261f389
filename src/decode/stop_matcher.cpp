#include "decode/stop_matcher.h"

#include <algorithm>

namespace lockstep {

StopMatcher::StopMatcher(const Tokenizer& tokenizer, std::vector<std::string> stops)
    : stream_(tokenizer, /*skip_special=*/true) {
  for (auto& s : stops)
    if (!s.empty()) {
      longest_ = std::max(longest_, s.size());
      stops_.push_back(std::move(s));
    }
}

size_t StopMatcher::push(int32_t id) {
  final_ += stream_.push(id);
  if (stops_.empty() || found_ != std::string::npos) return found_;
  const size_t from = scanned_ >= longest_ ? scanned_ - (longest_ - 1) : 0;
  scanned_ = final_.size();
  const std::string window = final_.substr(from) + stream_.pending();
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = window.find(s);
    if (at != std::string::npos) best = std::min(best, from + at);
  }
  found_ = best;
  return found_;
}

}  // namespace lockstep
