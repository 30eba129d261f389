// Python string semantics over UTF-8 bytes. Python strings index by code point and strip Unicode
// whitespace, so a template that slices or trims a non-ASCII message must do the same here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::chat::text {

// Byte offsets of each code point's start, plus a final entry equal to s.size().
std::vector<size_t> code_point_offsets(std::string_view s);
size_t code_point_count(std::string_view s);
std::vector<uint32_t> decode(std::string_view s);
void append_utf8(std::string& out, uint32_t cp);

bool is_space(uint32_t cp);  // Python str.isspace() for one code point
// str.strip / lstrip / rstrip. `chars` == nullptr strips whitespace, otherwise those code points.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split(sep, maxsplit): sep == nullptr splits on whitespace runs and drops empty fields.
std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
// Case mapping for ASCII, Latin-1/Extended-A, Greek, Cyrillic and fullwidth Latin (see text.cpp).
std::string lower(std::string_view s);
std::string upper(std::string_view s);
std::string title(std::string_view s);
std::string capitalize(std::string_view s);
// splitlines() on \n, \r\n and \r (the separators that occur in chat text).
std::vector<std::string> split_lines(std::string_view s);

std::string float_repr(double v);          // Python repr(float): 1.0, 1e-05, 1e+16, inf, nan
std::string string_repr(std::string_view s);  // Python repr(str), quote choice included

}  // namespace lockstep::chat::text
