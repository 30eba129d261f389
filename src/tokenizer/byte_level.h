// The GPT-2 byte <-> character table used by ByteLevel pre-tokenizers and decoders: printable
// Latin-1 bytes map to themselves, the other 68 bytes to U+0100.. in byte order, so that every
// byte becomes a visible vocabulary character.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep::byte_level {

// UTF-8 text of the character standing for each byte.
const std::array<std::string, 256>& byte_to_char();

// Maps `text` byte by byte to the table's characters.
std::string encode(std::string_view text);

// Reverses encode for one token: returns false (leaving `out` untouched) if some character of
// `token` is not in the table, in which case the reference library keeps the token's own bytes.
bool decode_token(std::string_view token, std::string& out);

}  // namespace lockstep::byte_level
