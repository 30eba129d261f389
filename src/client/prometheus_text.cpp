#include "client/prometheus_text.h"

#include <cstdlib>

namespace lockstep::client {

std::map<std::string, double> parse_prometheus_text(std::string_view text) {
  std::map<std::string, double> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line.front() == '#') continue;
    // The key ends at the first space outside the label braces (label values may hold spaces).
    size_t split = line.find('{');
    split = split == std::string_view::npos ? line.find(' ') : line.find(' ', line.find('}', split));
    if (split == std::string_view::npos) continue;
    const std::string value(line.substr(split + 1));
    char* parsed_end = nullptr;
    const double v = std::strtod(value.c_str(), &parsed_end);
    if (parsed_end == value.c_str()) continue;
    out[std::string(line.substr(0, split))] = v;
  }
  return out;
}

}  // namespace lockstep::client
