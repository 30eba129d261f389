// Errors. Every failure a user can cause (a bad file, a bad flag, a bad request) is a lockstep::Error
// whose message names the thing at fault and what was expected, so the CLI and server can print it
// as is. Internal invariant violations use LOCKSTEP_CHECK and also throw, never abort.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace lockstep {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Builds a message from streamable parts: fail("tensor ", name, ": expected ", a, ", found ", b).
template <typename... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  throw Error(out.str());
}

}  // namespace lockstep

#define LOCKSTEP_CHECK(cond, ...)                                                      \
  do {                                                                                 \
    if (!(cond)) ::lockstep::fail("internal check failed: " #cond " (", __FILE__, ":", \
                                  __LINE__, ") ", ##__VA_ARGS__);                      \
  } while (0)
