#!/usr/bin/env bash
# generate / score driven as a user would, on a random tiny checkpoint: greedy output identical
# run to run, across --threads and --prefill-chunk; seeded sampling reproducible; JSON shapes;
# clear errors for bad input.
# Usage: bash generate.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ids() { sed -n 's/.*"ids":\[\([0-9,]*\)\].*/\1/p' "$1"; }

"$bin" make-random --like tiny-qwen3 -o "$tmp/m" --seed 3 2>/dev/null
# 40 tokens of prompt so chunked prefill really chunks.
prompt=$(seq -s, 5 44)
run() { "$bin" generate -m "$tmp/m" --prompt-ids "$prompt" -n 24 --json "$@" 2>/dev/null; }

run --threads 1 > "$tmp/a.json"
run --threads 2 > "$tmp/b.json"
run --threads 2 --prefill-chunk 7 > "$tmp/c.json"
run --threads 1 --prefill-chunk 1 --ctx-size 100 > "$tmp/d.json"
a=$(ids "$tmp/a.json")
[[ -n "$a" && "$a" == *,*,* ]] || fail "no ids in $(cat "$tmp/a.json")"
[[ "$(echo "$a" | tr ',' '\n' | wc -l)" == 24 ]] || fail "expected 24 ids, got $a"
for f in b c d; do
  [[ "$(ids "$tmp/$f.json")" == "$a" ]] || fail "greedy output differs ($f): $(ids "$tmp/$f.json") vs $a"
done
grep -q '"timings":{' "$tmp/a.json" || fail "no timings in JSON"
grep -q '"decode_tok_s"' "$tmp/a.json" || fail "no decode_tok_s in JSON"

run --temp 0.9 --seed 11 --top-p 0.95 --top-k 50 --min-p 0.01 --repeat-penalty 1.1 > "$tmp/s1.json"
run --temp 0.9 --seed 11 --top-p 0.95 --top-k 50 --min-p 0.01 --repeat-penalty 1.1 --threads 1 --prefill-chunk 5 > "$tmp/s2.json"
run --temp 0.9 --seed 12 > "$tmp/s3.json"
[[ "$(ids "$tmp/s1.json")" == "$(ids "$tmp/s2.json")" ]] || fail "same seed, different output"
[[ "$(ids "$tmp/s1.json")" != "$a" ]] || fail "sampling at temperature 0.9 gave the greedy output"

# score: positions and perplexity.
"$bin" score -m "$tmp/m" --ids 1,2,3,4,5 --top 3 --json > "$tmp/score.json"
grep -q '"perplexity":[0-9]' "$tmp/score.json" || fail "score: no perplexity: $(cat "$tmp/score.json")"
[[ "$(grep -o '"top_ids"' "$tmp/score.json" | wc -l)" == 5 ]] || fail "score: expected 5 positions"
# score --logits-hash: one 16-digit hash per position; the same row bits give the same hash with
# another thread count and when the row is scored inside a shorter prompt.
hashes() { grep -o '"logits_fnv1a":"[0-9a-f]\{16\}"' "$1" | tr '\n' ' '; }
"$bin" score -m "$tmp/m" --ids 1,2,3,4,5 --logits-hash --json --threads 1 > "$tmp/h1.json"
"$bin" score -m "$tmp/m" --ids 1,2,3,4,5 --logits-hash --json --threads 2 > "$tmp/h2.json"
"$bin" score -m "$tmp/m" --ids 1,2,3 --logits-hash --json > "$tmp/h3.json"
[[ "$(hashes "$tmp/h1.json" | wc -w)" == 5 ]] || fail "score --logits-hash: $(cat "$tmp/h1.json")"
[[ "$(hashes "$tmp/h1.json")" == "$(hashes "$tmp/h2.json")" ]] || fail "logit hashes differ by threads"
[[ "$(hashes "$tmp/h1.json")" == "$(hashes "$tmp/h3.json")"* ]] || fail "logit hashes differ by length"

# Errors: clear message, non-zero exit, no crash.
expect_error() {  # expect_error PATTERN ARGS...
  local pat="$1"; shift
  if "$bin" "$@" > "$tmp/out" 2> "$tmp/err"; then fail "$* succeeded"; fi
  grep -q "$pat" "$tmp/err" || fail "$*: stderr lacks '$pat': $(cat "$tmp/err")"
}
expect_error "prompt-ids" generate -m "$tmp/m" --prompt-ids 1,x,3
expect_error "outside the vocabulary" generate -m "$tmp/m" --prompt-ids 1,999999 -n 2
expect_error "tokenizer.json" generate -m "$tmp/m" -p "hello"
expect_error "config.json" generate -m "$tmp/nowhere" --prompt-ids 1
expect_error "top_p" generate -m "$tmp/m" --prompt-ids 1 --temp 1 --top-p 0
# Tensor parallelism: 1 GPU runs; more are refused before any weight is read, saying why.
expect_error "not built yet" generate -m "$tmp/m" --prompt-ids 1 --device cuda --tensor-parallel 2
expect_error "applies to --device cuda" score -m "$tmp/m" --ids 1,2 --tensor-parallel-size 4
expect_error "not in range" generate -m "$tmp/m" --prompt-ids 1 --tensor-parallel 0
run --tensor-parallel 1 > "$tmp/tp1.json"
[[ "$(ids "$tmp/tp1.json")" == "$a" ]] || fail "--tensor-parallel 1 changed the output"
echo "generate.sh: ok"
