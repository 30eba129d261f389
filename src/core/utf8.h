// UTF-8 helpers shared by the tokenizer stages and the chat templates. The reference library works on Rust strings, which
// are always valid UTF-8; lockstep accepts arbitrary bytes and makes them valid first (see
// sanitize_utf8), so every later stage may assume well-formed input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep::utf8 {

// Replaces every ill-formed subsequence with U+FFFD using the "maximal subpart" rule of the
// Unicode standard (the rule of WHATWG TextDecoder and Rust's String::from_utf8_lossy), so the
// result equals what a JavaScript or Rust caller of the reference library would have passed in.
std::string sanitize(std::string_view bytes);

// True when `bytes` is well-formed UTF-8 (no surrogates, no overlongs, nothing above U+10FFFF).
bool is_valid(std::string_view bytes);

// Length in bytes of the well-formed character starting at s[i], or 0 if none starts there.
size_t char_len(std::string_view s, size_t i);

// Decodes the character at s[i] (which must be well-formed) and advances i past it.
char32_t next(std::string_view s, size_t& i);

void append(std::string& out, char32_t cp);

// Byte length of a trailing, well-formed but unfinished multi-byte sequence (0 if none): such
// bytes may still become a character when more bytes arrive.
size_t incomplete_tail(std::string_view bytes);

}  // namespace lockstep::utf8
