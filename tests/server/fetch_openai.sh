#!/usr/bin/env bash
# Installs the official OpenAI Node client (npm `openai`) into an ignored cache, once, and prints
# the cache directory. The server tests drive lockstep with it, as users' programs would.
#   usage: fetch_openai.sh <source-dir>
# Fails (non-zero, with a message) when node/npm are missing or the install does not work: the
# server tests must never pass by skipping.
set -euo pipefail
src=${1:?usage: fetch_openai.sh <source-dir>}
cache="$src/.cache/npm-openai"
version=4.104.0

for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "fetch_openai: '$tool' not found; run scripts/setup.sh (installs nodejs and npm)" >&2
    exit 1
  fi
done

mkdir -p "$cache"
exec 9>"$cache/.lock"  # tests may start at once: one installs, the others wait
flock 9
ready="$cache/.ready-$version"
if [ ! -f "$ready" ]; then
  [ -f "$cache/package.json" ] || echo '{"name":"lockstep-openai-client","private":true}' >"$cache/package.json"
  if ! (cd "$cache" && npm install --no-audit --no-fund --loglevel=error "openai@$version" >&2); then
    echo "fetch_openai: npm install failed (is the npm registry or its cache reachable?)" >&2
    exit 1
  fi
  if ! (cd "$cache" && node -e 'require("openai")' >&2); then
    echo "fetch_openai: the npm 'openai' package does not load on this machine" >&2
    exit 1
  fi
  touch "$ready"
fi
echo "$cache"
