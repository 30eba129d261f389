#include "client/sse_reader.h"

namespace lockstep::client {

std::vector<std::string> SseReader::feed(std::string_view bytes) {
  std::vector<std::string> events;
  size_t start = 0;
  while (start < bytes.size()) {
    const size_t nl = bytes.find('\n', start);
    if (nl == std::string_view::npos) {
      line_.append(bytes.substr(start));
      break;
    }
    line_.append(bytes.substr(start, nl - start));
    start = nl + 1;
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) {  // a blank line dispatches the event (one without data is none)
      if (has_data_) events.push_back(std::move(data_));
      data_.clear();
      has_data_ = false;
    } else if (line_.rfind("data:", 0) == 0) {
      std::string_view value = std::string_view(line_).substr(5);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (has_data_) data_ += '\n';
      data_.append(value);
      has_data_ = true;
    }
    line_.clear();
  }
  return events;
}

}  // namespace lockstep::client
