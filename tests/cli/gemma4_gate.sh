#!/usr/bin/env bash
# The generation gate on a random Gemma 3 (tiny-gemma4: sliding window 8, global layers every
# third) with a random Gemma 3 draft: prompts of 9 to 64 ids plus a repeat, all longer than the window, 48 new tokens each, must
# give classic decode's exact tokens under chunked prefill, batching, and lookup / draft
# speculation at every width, at temperature 0 and seeded 0.8. verify exits 1 on any difference.
# Usage: bash gemma4_gate.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$bin" make-random --like tiny-gemma4 -o "$tmp/target" --seed 3 2>/dev/null
"$bin" make-random --like tiny-gemma4 -o "$tmp/draft" --seed 4 2>/dev/null
# Id prompts (no tokenizer): a stretch, then a repeat of its start so lookup finds matches.
for n in 9 12 19 27 40 64; do
  ids=""
  for ((i = 0; i < n; ++i)); do ids+="$(( (i * 37 + n * 11 + 5) % 509 )),"; done
  for ((i = 0; i < 6; ++i)); do ids+="$(( (i * 37 + n * 11 + 5) % 509 )),"; done
  echo "{\"ids\": [${ids%,}]}"
done > "$tmp/prompts.jsonl"
"$bin" make-random --like tiny-gemma4-moe -o "$tmp/moe" --seed 5 2>/dev/null
for target in target moe; do
  "$bin" verify -m "$tmp/$target" --draft-model "$tmp/draft" --prompts "$tmp/prompts.jsonl" -n 48 \
    --threads 2 | tee "$tmp/out"
  grep -q "^PASS: 132 identical, 0 diverged" "$tmp/out" ||
    { echo "FAIL: gate diverged or did not run every case ($target)" >&2; exit 1; }
  for mode in batched classic-chunked draft/w4 lookup/w8; do
    grep -q "^$mode " "$tmp/out" || { echo "FAIL: mode $mode missing from the gate ($target)" >&2; exit 1; }
  done
done
echo "gemma4_gate.sh: ok"
