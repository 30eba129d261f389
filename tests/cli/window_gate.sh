#!/usr/bin/env bash
# The generation gate on random sliding-window models: Gemma 3 (tiny-gemma3: window 8, global
# layers every third), Gemma 4 (tiny-gemma4: window 8, global layers with their own head dim and
# values = keys, the last two layers reading earlier layers' KV, per-layer inputs) and its MoE
# variant (tiny-gemma4-moe), each with a random draft of its family. Prompts of 9 to 64 ids plus a
# repeat, all longer than the window, 48 new tokens each, must give classic decode's exact tokens
# under chunked prefill, batching, and lookup / draft speculation at every width, at temperature 0
# and seeded 0.8. verify exits 1 on any difference.
# Usage: bash window_gate.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Id prompts (no tokenizer): a stretch, then a repeat of its start so lookup finds matches.
for n in 9 12 19 27 40 64; do
  ids=""
  for ((i = 0; i < n; ++i)); do ids+="$(( (i * 37 + n * 11 + 5) % 509 )),"; done
  for ((i = 0; i < 6; ++i)); do ids+="$(( (i * 37 + n * 11 + 5) % 509 )),"; done
  echo "{\"ids\": [${ids%,}]}"
done > "$tmp/prompts.jsonl"
"$bin" make-random --like tiny-gemma3 -o "$tmp/gemma3-draft" --seed 4 2>/dev/null
"$bin" make-random --like tiny-gemma4 -o "$tmp/gemma4-draft" --seed 4 2>/dev/null
# target preset, seed, draft
for run in "tiny-gemma3 3 gemma3-draft" "tiny-gemma4 3 gemma4-draft" "tiny-gemma4-moe 5 gemma4-draft"; do
  read -r like seed draft <<<"$run"
  "$bin" make-random --like "$like" -o "$tmp/$like" --seed "$seed" 2>/dev/null
  "$bin" verify -m "$tmp/$like" --draft-model "$tmp/$draft" --prompts "$tmp/prompts.jsonl" -n 48 \
    --threads 2 | tee "$tmp/out"
  grep -q "^PASS: 132 identical, 0 diverged" "$tmp/out" ||
    { echo "FAIL: gate diverged or did not run every case ($like)" >&2; exit 1; }
  for mode in batched classic-chunked draft/w4 lookup/w8; do
    grep -q "^$mode " "$tmp/out" || { echo "FAIL: mode $mode missing from the gate ($like)" >&2; exit 1; }
  done
done
echo "window_gate.sh: ok"
