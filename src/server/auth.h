// Bearer-token check for --api-key: OpenAI clients send "Authorization: Bearer <key>".
#pragma once

#include <string>

namespace lockstep::server {

// True when `authorization` (the header's value, "" when absent) carries `api_key`.
// The comparison takes the same time wherever the first difference is.
bool bearer_ok(const std::string& authorization, const std::string& api_key);

// Paths that answer without a key (load balancers probe /health).
bool is_public_path(const std::string& path);

}  // namespace lockstep::server
