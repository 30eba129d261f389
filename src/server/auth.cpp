#include "server/auth.h"

#include <cctype>

namespace lockstep::server {

bool bearer_ok(const std::string& authorization, const std::string& api_key) {
  const std::string scheme = "bearer ";
  if (authorization.size() < scheme.size()) return false;
  for (size_t i = 0; i < scheme.size(); ++i)  // the scheme is case-insensitive (RFC 7235)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i]) return false;
  size_t start = scheme.size();
  while (start < authorization.size() && authorization[start] == ' ') ++start;
  const std::string given = authorization.substr(start);
  unsigned diff = given.size() == api_key.size() ? 0u : 1u;
  for (size_t i = 0; i < api_key.size(); ++i)
    diff |= static_cast<unsigned>(static_cast<unsigned char>(api_key[i]) ^
                                  static_cast<unsigned char>(i < given.size() ? given[i] : 0));
  return diff == 0;
}

bool is_public_path(const std::string& path) { return path == "/health"; }

}  // namespace lockstep::server
